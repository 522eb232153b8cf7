// The scalar reference kernels: every SIMD variant is tested against these.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels::scalar {
namespace {

template <class block>
block load_block(const void* w, std::int64_t i) {
  block b;
  std::memcpy(&b, static_cast<const std::byte*>(w) + static_cast<std::size_t>(i) * sizeof(block), sizeof(block));
  return b;
}

void k_scale_min(int j, const std::uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

float dot_f32(const void* w, const act_row& x, std::int64_t k) { return dot(static_cast<const float*>(w), x.f, k); }

/// 16-bit floats (f16 or bf16, by `to_f32`) times f32 activations, in 8 running sums.
template <float (*to_f32)(std::uint16_t)>
float dot_half(const void* w, const act_row& x, std::int64_t k) {
  const auto* h = static_cast<const std::uint16_t*>(w);
  float s[8] = {};
  for (std::int64_t i = 0; i < k; i += 8)
    for (int j = 0; j < 8 && i + j < k; ++j) s[j] += to_f32(h[i + j]) * x.f[i + j];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/// The integer dot of one 32-value block's levels with its 32 activations (q8_32), for q4_0.
int q4_0_level_dot(const block_q4_0& blk, const std::int8_t* q) {
  int s = 0;
  for (int j = 0; j < k_qk / 2; ++j) s += ((blk.qs[j] & 0xF) - 8) * q[j] + ((blk.qs[j] >> 4) - 8) * q[j + k_qk / 2];
  return s;
}

int q4_1_level_dot(const block_q4_1& blk, const std::int8_t* q) {
  int s = 0;
  for (int j = 0; j < k_qk / 2; ++j) s += (blk.qs[j] & 0xF) * q[j] + (blk.qs[j] >> 4) * q[j + k_qk / 2];
  return s;
}

/// The 32 levels (0..31) of a q5_0 / q5_1 block times the activations, summed.
template <class block>
int q5_level_dot(const block& blk, const std::int8_t* q) {
  std::uint32_t qh;
  std::memcpy(&qh, blk.qh, 4);
  int s = 0;
  for (int j = 0; j < k_qk / 2; ++j) {
    const int lo = (blk.qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
    const int hi = (blk.qs[j] >> 4) | static_cast<int>(((qh >> (j + k_qk / 2)) & 1) << 4);
    s += lo * q[j] + hi * q[j + k_qk / 2];
  }
  return s;
}

/// The table's int8 levels times the activations.
int iq4_nl_level_dot(const block_iq4_nl& blk, const std::int8_t* q) {
  int s = 0;
  for (int j = 0; j < k_qk / 2; ++j)
    s += k_iq4_nl_values[blk.qs[j] & 0xF] * q[j] + k_iq4_nl_values[blk.qs[j] >> 4] * q[j + k_qk / 2];
  return s;
}

int mxfp4_level_dot(const block_mxfp4& blk, const std::int8_t* q) {
  int s = 0;
  for (int j = 0; j < k_qk / 2; ++j)
    s += k_mxfp4_values[blk.qs[j] & 0xF] * q[j] + k_mxfp4_values[blk.qs[j] >> 4] * q[j + k_qk / 2];
  return s;
}

int q8_0_level_dot(const block_q8_0& blk, const std::int8_t* q) {
  int s = 0;
  for (int j = 0; j < k_qk; ++j) s += blk.qs[j] * q[j];
  return s;
}

/// Blocks of 32 levels with one scale d (q4_0, q5_0, iq4_nl, q8_0): the levels times the
/// activations in integers, then one scale per block. Levels stored with a bias (q5_0: 16) take
/// it off as sum (level - bias) a = sum(level a) - bias sum(a), all in integers.
template <class block, int (*level_dot)(const block&, const std::int8_t*), int bias = 0>
float dot_scaled(const void* w, const act_row& x, std::int64_t k) {
  float sum = 0;
  for (std::int64_t b = 0; b < k / k_qk; ++b) {
    const auto blk = load_block<block>(w, b);
    int s = level_dot(blk, x.qs + b * k_qk);
    if constexpr (bias != 0) s -= bias * x.sums[b];
    sum += fp16_to_fp32(blk.d) * x.d[b] * static_cast<float>(s);
  }
  return sum;
}

/// Blocks with a scale d and an offset m (q4_1, q5_1): sum (d q + m) a over a block is
/// d sum(q a) + m sum(a); the activation sums per 32 give the second term.
template <class block, int (*level_dot)(const block&, const std::int8_t*)>
float dot_with_min(const void* w, const act_row& x, std::int64_t k) {
  float sum = 0;
  for (std::int64_t b = 0; b < k / k_qk; ++b) {
    const auto blk = load_block<block>(w, b);
    const int s = level_dot(blk, x.qs + b * k_qk);
    sum += x.d[b] * (fp16_to_fp32(blk.d) * static_cast<float>(s) + fp16_to_fp32(blk.m) * static_cast<float>(x.sums[b]));
  }
  return sum;
}

constexpr auto dot_f16 = dot_half<fp16_to_fp32>;
constexpr auto dot_bf16 = dot_half<bf16_to_fp32>;
constexpr auto dot_q4_0 = dot_scaled<block_q4_0, q4_0_level_dot>;
constexpr auto dot_q4_1 = dot_with_min<block_q4_1, q4_1_level_dot>;
constexpr auto dot_q5_0 = dot_scaled<block_q5_0, q5_level_dot<block_q5_0>, 16>;
constexpr auto dot_q5_1 = dot_with_min<block_q5_1, q5_level_dot<block_q5_1>>;
constexpr auto dot_iq4_nl = dot_scaled<block_iq4_nl, iq4_nl_level_dot>;
constexpr auto dot_q8_0 = dot_scaled<block_q8_0, q8_0_level_dot>;

/// mxfp4: the table's doubled e2m1 levels times the activations, then the halved e8m0 scale.
float dot_mxfp4(const void* w, const act_row& x, std::int64_t k) {
  float sum = 0;
  for (std::int64_t b = 0; b < k / k_qk; ++b) {
    const auto blk = load_block<block_mxfp4>(w, b);
    sum += e8m0_to_fp32_half(blk.e) * x.d[b] * static_cast<float>(mxfp4_level_dot(blk, x.qs + b * k_qk));
  }
  return sum;
}

/// q4_K and q5_K: element 64c + l of a super-block is the low nibble of qs[32c + l] (sub-block 2c),
/// element 64c + 32 + l the high nibble (sub-block 2c + 1); q5_K adds bit 2c / 2c+1 of qh[l] as 16.
template <bool five>
float dot_k45(const void* w, const act_row& x, std::int64_t k) {
  float sum = 0;
  for (std::int64_t b = 0; b < k / k_qk_k; ++b) {
    const std::uint8_t *qs, *qh = nullptr, *scales;
    std::uint16_t d16, dmin16;
    block_q4_k b4;
    block_q5_k b5;
    if constexpr (five) {
      b5 = load_block<block_q5_k>(w, b);
      qs = b5.qs, qh = b5.qh, scales = b5.scales, d16 = b5.d, dmin16 = b5.dmin;
    } else {
      b4 = load_block<block_q4_k>(w, b);
      qs = b4.qs, scales = b4.scales, d16 = b4.d, dmin16 = b4.dmin;
    }
    const std::int8_t* q = x.qs + b * k_qk_k;
    const std::int32_t* bs = x.sums + b * 16;
    int isum = 0, msum = 0;
    for (int sub = 0; sub < 8; ++sub) {
      int sc, m;
      k_scale_min(sub, scales, sc, m);
      const int c = sub / 2, hi = sub % 2;
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        int v = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0xF;
        if constexpr (five) v += ((qh[l] >> sub) & 1) << 4;
        s += v * q[32 * sub + l];
      }
      isum += sc * s;
      msum += m * (bs[2 * sub] + bs[2 * sub + 1]);
    }
    sum += x.d[b] * (fp16_to_fp32(d16) * static_cast<float>(isum) - fp16_to_fp32(dmin16) * static_cast<float>(msum));
  }
  return sum;
}

float dot_q6_k(const void* w, const act_row& x, std::int64_t k) {
  float sum = 0;
  for (std::int64_t b = 0; b < k / k_qk_k; ++b) {
    const auto blk = load_block<block_q6_k>(w, b);
    const std::int8_t* q = x.qs + b * k_qk_k;
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const std::uint8_t* ql = blk.ql + 64 * h;
      const std::uint8_t* qh = blk.qh + 32 * h;
      const std::int8_t* sc = blk.scales + 8 * h;
      const std::int8_t* qx = q + 128 * h;
      for (int g = 0; g < 2; ++g) {  // l in [16g, 16g + 16) shares scales sc[g + 0, 2, 4, 6]
        int s1 = 0, s2 = 0, s3 = 0, s4 = 0;
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          s1 += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * qx[l];
          s2 += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * qx[l + 32];
          s3 += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * qx[l + 64];
          s4 += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * qx[l + 96];
        }
        isum += sc[g] * s1 + sc[g + 2] * s2 + sc[g + 4] * s3 + sc[g + 6] * s4;
      }
    }
    sum += fp16_to_fp32(blk.d) * x.d[b] * static_cast<float>(isum);
  }
  return sum;
}

void gemm_f32(const float* w, const float* x, std::int64_t k, int nr, int nc, float* y, std::int64_t ldy) {
  for (int c = 0; c < nc; ++c)
    for (int r = 0; r < nr; ++r) y[c * ldy + r] = dot(w + r * k, x + c * k, k);
}

}  // namespace

float dot(const float* a, const float* b, std::int64_t n) {
  // Eight partial sums, like the SIMD variants, keep rounding error comparable and small.
  float s[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  float t = 0;
  for (; i < n; ++i) t += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}

void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void axpy(float a, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void quantize_groups(const float* x, std::int64_t k, int group, int sum_group, std::int8_t* qs, float* d,
                     std::int32_t* sums) {
  for (std::int64_t g = 0; g < k / group; ++g) {
    const float* xg = x + g * group;
    float amax = 0;
    for (int j = 0; j < group; ++j) amax = std::max(amax, std::fabs(xg[j]));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    d[g] = amax / 127.0f;
    for (int j = 0; j < group; ++j) {
      int q = static_cast<int>(std::nearbyint(xg[j] * inv));
      qs[g * group + j] = static_cast<std::int8_t>(std::clamp(q, -127, 127));
    }
  }
  for (std::int64_t s = 0; s < k / sum_group; ++s) {
    std::int32_t t = 0;
    for (int j = 0; j < sum_group; ++j) t += qs[s * sum_group + j];
    sums[s] = t;
  }
}

void silu(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void gelu(float* x, std::int64_t n) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2/pi)
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

std::uint64_t sum_words(const std::uint64_t* p, std::int64_t n) {
  std::uint64_t s[8] = {};
  for (std::int64_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void fill_table(kernel_table& t) {
  for (auto& f : t.sum_words) f = sum_words;  // one loop: the compiler picks its shape
  t.f32_to_f16 = f32_to_f16;
  t.silu = silu;
  t.gelu = gelu;
  t.rms_norm = rms_norm;
  t.quantize_groups = quantize_groups;
  t.level = simd_level::scalar;
  t.dot = dot;
  t.f16_to_f32 = f16_to_f32;
  t.axpy = axpy;
  t.row_dot[dtype_slot(dtype::f32)] = dot_f32;
  t.row_dot[dtype_slot(dtype::f16)] = dot_f16;
  t.row_dot[dtype_slot(dtype::bf16)] = dot_bf16;
  t.row_dot[dtype_slot(dtype::q4_0)] = dot_q4_0;
  t.row_dot[dtype_slot(dtype::q4_1)] = dot_q4_1;
  t.row_dot[dtype_slot(dtype::q5_0)] = dot_q5_0;
  t.row_dot[dtype_slot(dtype::q5_1)] = dot_q5_1;
  t.row_dot[dtype_slot(dtype::iq4_nl)] = dot_iq4_nl;
  t.row_dot[dtype_slot(dtype::mxfp4)] = dot_mxfp4;
  t.row_dot[dtype_slot(dtype::q8_0)] = dot_q8_0;
  t.row_dot[dtype_slot(dtype::q4_k)] = dot_k45<false>;
  t.row_dot[dtype_slot(dtype::q5_k)] = dot_k45<true>;
  t.row_dot[dtype_slot(dtype::q6_k)] = dot_q6_k;
  t.row_gemm[dtype_slot(dtype::q4_0)] = row_gemm_by_dots<dot_q4_0>;
  t.row_gemm[dtype_slot(dtype::q4_1)] = row_gemm_by_dots<dot_q4_1>;
  t.row_gemm[dtype_slot(dtype::q5_0)] = row_gemm_by_dots<dot_q5_0>;
  t.row_gemm[dtype_slot(dtype::q5_1)] = row_gemm_by_dots<dot_q5_1>;
  t.row_gemm[dtype_slot(dtype::iq4_nl)] = row_gemm_by_dots<dot_iq4_nl>;
  t.row_gemm[dtype_slot(dtype::mxfp4)] = row_gemm_by_dots<dot_mxfp4>;
  t.row_gemm[dtype_slot(dtype::q8_0)] = row_gemm_by_dots<dot_q8_0>;
  t.row_gemm[dtype_slot(dtype::q4_k)] = row_gemm_by_dots<dot_k45<false>>;
  t.row_gemm[dtype_slot(dtype::q5_k)] = row_gemm_by_dots<dot_k45<true>>;
  t.row_gemm[dtype_slot(dtype::q6_k)] = row_gemm_by_dots<dot_q6_k>;
  t.gemm_f32 = gemm_f32;
}

}  // namespace strata::kernels::scalar
