#include "kernels/quants.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace strata::kernels {
namespace {

void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void set_scale_min_k4(int j, std::uint8_t* q, std::uint8_t sc, std::uint8_t m) {
  if (j < 4) {
    q[j] = static_cast<std::uint8_t>((q[j] & 0xC0) | sc);
    q[j + 4] = static_cast<std::uint8_t>((q[j + 4] & 0xC0) | m);
  } else {
    q[j + 4] = static_cast<std::uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    q[j - 4] = static_cast<std::uint8_t>((q[j - 4] & 0x3F) | ((sc >> 4) << 6));
    q[j] = static_cast<std::uint8_t>((q[j] & 0x3F) | ((m >> 4) << 6));
  }
}

void dequant_q4_0(const block_q4_0* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < k_qk / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
      y[j + k_qk / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const block_q4_1* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < k_qk / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
      y[j + k_qk / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

/// Level j (0..31) of a q5_0 / q5_1 block: nibble j in the q4_0 order, bit j of qh above it.
int q5_level(const std::uint8_t* qs, const std::uint8_t* qh, int j) {
  std::uint32_t h;
  std::memcpy(&h, qh, 4);
  const int nibble = j < k_qk / 2 ? qs[j] & 0xF : qs[j - k_qk / 2] >> 4;
  return nibble | static_cast<int>(((h >> j) & 1) << 4);
}

/// Stores 32 levels of 0..31 as q5_0 / q5_1 nibbles and fifth bits.
void put_q5_levels(const int* level, std::uint8_t* qs, std::uint8_t* qh) {
  std::uint32_t h = 0;
  for (int j = 0; j < k_qk / 2; ++j) {
    qs[j] = static_cast<std::uint8_t>((level[j] & 0xF) | ((level[j + k_qk / 2] & 0xF) << 4));
    h |= static_cast<std::uint32_t>(level[j] >> 4) << j;
    h |= static_cast<std::uint32_t>(level[j + k_qk / 2] >> 4) << (j + k_qk / 2);
  }
  std::memcpy(qh, &h, 4);
}

void dequant_q5_0(const block_q5_0* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < k_qk; ++j) y[j] = static_cast<float>(q5_level(b[i].qs, b[i].qh, j) - 16) * d;
  }
}

void dequant_q5_1(const block_q5_1* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < k_qk; ++j) y[j] = static_cast<float>(q5_level(b[i].qs, b[i].qh, j)) * d + m;
  }
}

void dequant_iq4_nl(const block_iq4_nl* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < k_qk / 2; ++j) {
      y[j] = static_cast<float>(k_iq4_nl_values[b[i].qs[j] & 0xF]) * d;
      y[j + k_qk / 2] = static_cast<float>(k_iq4_nl_values[b[i].qs[j] >> 4]) * d;
    }
  }
}

void dequant_q8_0(const block_q8_0* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < k_qk; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

/// q4_K and q5_K: each 64 values are two sub-blocks with their own scale and min, the low nibbles
/// of 32 bytes then the high ones; q5_K adds bit 2c / 2c + 1 of qh[l] as 16.
template <class block>
void dequant_k45(const block* b, float* y, std::int64_t nb) {
  constexpr bool five = std::is_same_v<block, block_q5_k>;
  for (std::int64_t i = 0; i < nb; ++i) {
    float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const std::uint8_t* q = b[i].qs;
    std::uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < k_qk_k; j += 64, is += 2, q += 32) {
      std::uint8_t sc, m;
      scale_min_k4(is, b[i].scales, sc, m);
      float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, b[i].scales, sc, m);
      float d2 = d * sc, m2 = dmin * m;
      int high1[32] = {}, high2[32] = {};
      if constexpr (five) {
        for (int l = 0; l < 32; ++l) {
          high1[l] = (b[i].qh[l] & u1) ? 16 : 0;
          high2[l] = (b[i].qh[l] & u2) ? 16 : 0;
        }
        u1 = static_cast<std::uint8_t>(u1 << 2);
        u2 = static_cast<std::uint8_t>(u2 << 2);
      }
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((q[l] & 0xF) + high1[l]) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((q[l] >> 4) + high2[l]) - m2;
    }
  }
}

void dequant_q6_k(const block_q6_k* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    float d = fp16_to_fp32(b[i].d);
    const std::uint8_t* ql = b[i].ql;
    const std::uint8_t* qh = b[i].qh;
    const std::int8_t* sc = b[i].scales;
    for (int n = 0; n < k_qk_k; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

void quant_q8_0(const float* x, block_q8_0* b, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk) {
    float amax = 0;
    for (int j = 0; j < k_qk; ++j) amax = std::max(amax, std::fabs(x[j]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < k_qk; ++j) b[i].qs[j] = static_cast<std::int8_t>(std::lround(x[j] * id));
  }
}

/// The value of largest magnitude among x[0..n), with its sign (the first of equals; 0 for an
/// all-zero block).
float largest_magnitude(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void quant_q4_0(const float* x, block_q4_0* b, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk) {
    const float max = largest_magnitude(x, k_qk);
    float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < k_qk / 2; ++j) {
      int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      int q1 = std::min(15, static_cast<int>(x[j + k_qk / 2] * id + 8.5f));
      b[i].qs[j] = static_cast<std::uint8_t>(std::max(0, q0) | (std::max(0, q1) << 4));
    }
  }
}

/// A block's range [lo, hi] in top + 1 even steps (q4_1: 16, q5_1: 32): d = (hi - lo) / top, and
/// level[j] is (x[j] - lo) / d rounded to nearest (ties up), at most top. The levels are taken
/// from the f32 d and lo, before they are rounded to f16.
struct range_fit {
  float d, lo;
};
range_fit fit_range(const float* x, int top, int* level) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < k_qk; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / static_cast<float>(top), id = d != 0 ? 1.0f / d : 0.0f;
  // (x - lo) * id >= 0, so truncation after adding 0.5 rounds to nearest.
  for (int j = 0; j < k_qk; ++j) level[j] = std::min(top, static_cast<int>((x[j] - lo) * id + 0.5f));
  return {d, lo};
}

/// ggml's q5_0 reference: the block's value of largest magnitude, max, becomes level 0 (-16 d)
/// with d = max / -16, and the level of x is x / d + 16 rounded to nearest (ties up), at most 31.
void quant_q5_0(const float* x, block_q5_0* b, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk) {
    const float max = largest_magnitude(x, k_qk);
    const float d = max / -16.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    int level[k_qk];
    // x * id + 16.5 >= 0.5 up to rounding (|x * id| <= 16), so truncation rounds to nearest.
    for (int j = 0; j < k_qk; ++j) level[j] = std::clamp(static_cast<int>(x[j] * id + 16.5f), 0, 31);
    put_q5_levels(level, b[i].qs, b[i].qh);
  }
}

/// q4_1 (block_q4_1: 16 levels in nibbles) and q5_1 (32 levels, the fifth bits in qh): per block
/// its range in even steps (fit_range), d and m stored as f16.
template <class block>
void quant_with_min(const float* x, block* b, std::int64_t nb) {
  constexpr bool five = std::is_same_v<block, block_q5_1>;
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk) {
    int level[k_qk];
    const range_fit f = fit_range(x, five ? 31 : 15, level);
    b[i].d = fp32_to_fp16(f.d);
    b[i].m = fp32_to_fp16(f.lo);
    if constexpr (five) {
      put_q5_levels(level, b[i].qs, b[i].qh);
    } else {
      for (int j = 0; j < k_qk / 2; ++j) b[i].qs[j] = static_cast<std::uint8_t>(level[j] | (level[j + k_qk / 2] << 4));
    }
  }
}

void dequant_mxfp4(const block_mxfp4* b, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, y += k_qk) {
    const float d = e8m0_to_fp32_half(b[i].e);
    for (int j = 0; j < k_qk / 2; ++j) {
      y[j] = static_cast<float>(k_mxfp4_values[b[i].qs[j] & 0xF]) * d;
      y[j + k_qk / 2] = static_cast<float>(k_mxfp4_values[b[i].qs[j] >> 4]) * d;
    }
  }
}

/// The scale 2^(floor(log2 max) - 2) puts the largest magnitude within the top level (6 times the
/// scale, stored doubled as 12); each value then takes its nearest level (the first at a tie),
/// as ggml's reference quantizer does.
void quant_mxfp4(const float* x, block_mxfp4* b, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk) {
    const float max = std::fabs(largest_magnitude(x, k_qk));
    const int e = max > 0 ? std::clamp(static_cast<int>(std::floor(std::log2(max))) - 2 + 127, 0, 254) : 0;
    b[i].e = static_cast<std::uint8_t>(e);
    const float d = e8m0_to_fp32_half(b[i].e);
    auto nearest = [&](float v) {
      int best = 0;
      for (int n = 1; n < 16; ++n)
        if (std::fabs(k_mxfp4_values[n] * d - v) < std::fabs(k_mxfp4_values[best] * d - v)) best = n;
      return best;
    };
    for (int j = 0; j < k_qk / 2; ++j) b[i].qs[j] = static_cast<std::uint8_t>(nearest(x[j]) | (nearest(x[j + k_qk / 2]) << 4));
  }
}

/// The scales quant_iq4_nl tries per block: max / v with v = -127 + k_iq4_nl_scale_steps[s], max
/// the block's value of largest magnitude. Step 0 maps max onto the most negative level; the
/// others stretch or shrink the grid (on N(0, 1) blocks the relative RMS error goes from 0.080
/// with step 0 alone to 0.075; a finer or wider search gains under 0.001 more).
inline constexpr float k_iq4_nl_scale_steps[] = {0, -8, -4, 4, 8, 12, 16, 20, 24};

/// Per block, each scale d of k_iq4_nl_scale_steps, rounded to f16 as it will be stored, gets
/// every value's nearest level (x / d); the scale with the least squared error wins (the first at
/// a tie, so step 0 unless another is strictly better).
void quant_iq4_nl(const float* x, block_iq4_nl* b, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk) {
    const float max = largest_magnitude(x, k_qk);
    // Without a usable scale (an all-zero block) every value is 1 * 0.
    std::uint16_t best_d = 0;
    int best[k_qk];
    std::fill(best, best + k_qk, 8);
    float best_err = std::numeric_limits<float>::infinity();
    for (float step : k_iq4_nl_scale_steps) {
      const std::uint16_t dh = fp32_to_fp16(max / (-127.0f + step));
      const float d = fp16_to_fp32(dh);
      if (d == 0 || !std::isfinite(d)) continue;
      // The nearest entry to v = x / d (the lower one at a midpoint) is the number of midpoints
      // between neighbouring entries that v is above, counted without branches for 32 values at
      // a time (a binary search per value mispredicts on random weights: 5x slower here).
      float v2[k_qk];
      for (int j = 0; j < k_qk; ++j) v2[j] = 2.0f * (x[j] * (1.0f / d));
      int level[k_qk] = {};
      for (int n = 1; n < 16; ++n) {
        const auto mid2 = static_cast<float>(k_iq4_nl_values[n - 1] + k_iq4_nl_values[n]);
        for (int j = 0; j < k_qk; ++j) level[j] += v2[j] > mid2 ? 1 : 0;
      }
      float err = 0;
      for (int j = 0; j < k_qk; ++j) {
        const float e = x[j] - d * static_cast<float>(k_iq4_nl_values[level[j]]);
        err += e * e;
      }
      if (err < best_err) {
        best_err = err;
        best_d = dh;
        std::copy(level, level + k_qk, best);
      }
    }
    b[i].d = best_d;
    for (int j = 0; j < k_qk / 2; ++j) b[i].qs[j] = static_cast<std::uint8_t>(best[j] | (best[j + k_qk / 2] << 4));
  }
}

/// Fits x[0..32) ~ scale * q - min with q in [0, qmax]; returns scale and min (min >= 0).
void fit_min_max(const float* x, int qmax, float& scale, float& min) {
  float lo = x[0], hi = x[0];
  for (int l = 1; l < 32; ++l) {
    lo = std::min(lo, x[l]);
    hi = std::max(hi, x[l]);
  }
  lo = std::min(lo, 0.0f);
  scale = hi > lo ? (hi - lo) / static_cast<float>(qmax) : 0.0f;
  min = -lo;
}

/// Shared by q4_K and q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; writes the integer
/// levels to L (0..qmax).
void quant_k_scales(const float* x, int qmax, std::uint16_t& d_out, std::uint16_t& dmin_out, std::uint8_t* scales,
                    std::uint8_t* L) {
  float sc[8], mn[8], max_sc = 0, max_mn = 0;
  for (int j = 0; j < 8; ++j) {
    fit_min_max(x + 32 * j, qmax, sc[j], mn[j]);
    max_sc = std::max(max_sc, sc[j]);
    max_mn = std::max(max_mn, mn[j]);
  }
  float d = max_sc / 63.0f, dmin = max_mn / 63.0f;
  d_out = fp32_to_fp16(d);
  dmin_out = fp32_to_fp16(dmin);
  d = fp16_to_fp32(d_out);
  dmin = fp16_to_fp32(dmin_out);
  std::memset(scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    auto ls = static_cast<std::uint8_t>(d > 0 ? std::clamp(static_cast<int>(std::lround(sc[j] / d)), 0, 63) : 0);
    auto lm = static_cast<std::uint8_t>(dmin > 0 ? std::clamp(static_cast<int>(std::lround(mn[j] / dmin)), 0, 63) : 0);
    set_scale_min_k4(j, scales, ls, lm);
    float ds = d * ls, dm = dmin * lm;
    for (int l = 0; l < 32; ++l) {
      int q = ds > 0 ? static_cast<int>(std::lround((x[32 * j + l] + dm) / ds)) : 0;
      L[32 * j + l] = static_cast<std::uint8_t>(std::clamp(q, 0, qmax));
    }
  }
}

void quant_q4_k(const float* x, block_q4_k* b, std::int64_t nb) {
  std::uint8_t L[k_qk_k];
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk_k) {
    quant_k_scales(x, 15, b[i].d, b[i].dmin, b[i].scales, L);
    for (int j = 0; j < k_qk_k; j += 64)
      for (int l = 0; l < 32; ++l) b[i].qs[j / 2 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quant_q5_k(const float* x, block_q5_k* b, std::int64_t nb) {
  std::uint8_t L[k_qk_k];
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk_k) {
    quant_k_scales(x, 31, b[i].d, b[i].dmin, b[i].scales, L);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    std::uint8_t m1 = 1, m2 = 2;
    for (int j = 0; j < k_qk_k; j += 64) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[j + l], l2 = L[j + l + 32];
        if (l1 > 15) { l1 -= 16; b[i].qh[l] |= m1; }
        if (l2 > 15) { l2 -= 16; b[i].qh[l] |= m2; }
        b[i].qs[j / 2 + l] = static_cast<std::uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<std::uint8_t>(m1 << 2);
      m2 = static_cast<std::uint8_t>(m2 << 2);
    }
  }
}

void quant_q6_k(const float* x, block_q6_k* b, std::int64_t nb) {
  std::int8_t L[k_qk_k];
  for (std::int64_t i = 0; i < nb; ++i, x += k_qk_k) {
    float sc[16], max_abs_sc = 0;
    for (int j = 0; j < 16; ++j) {
      const float max = largest_magnitude(x + 16 * j, 16);
      sc[j] = max / -32.0f;
      if (std::fabs(sc[j]) > std::fabs(max_abs_sc)) max_abs_sc = sc[j];
    }
    float d = max_abs_sc / -128.0f;
    b[i].d = fp32_to_fp16(d);
    d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      int ls = d != 0 ? std::clamp(static_cast<int>(std::lround(sc[j] / d)), -128, 127) : 0;
      b[i].scales[j] = static_cast<std::int8_t>(ls);
      float ds = d * static_cast<float>(ls);
      for (int l = 0; l < 16; ++l) {
        int q = ds != 0 ? static_cast<int>(std::lround(x[16 * j + l] / ds)) : 0;
        L[16 * j + l] = static_cast<std::int8_t>(std::clamp(q, -32, 31) + 32);
      }
    }
    std::uint8_t* ql = b[i].ql;
    std::uint8_t* qh = b[i].qh;
    for (int j = 0; j < k_qk_k; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<std::uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                          ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

float fp16_to_fp32(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  std::uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  std::uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      u = sign | ((127 - 15 - static_cast<std::uint32_t>(e)) << 23) | ((mant & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7F800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t fp32_to_fp16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  std::uint32_t sign = (x >> 16) & 0x8000;
  std::uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) return static_cast<std::uint16_t>(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0));
  if (abs >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (abs < 0x38800000) {  // subnormal or zero in f16
    // Multiples of 2^-24, rounded to nearest even; 1024 lands exactly on the smallest normal.
    float v = std::fabs(f) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(v)));
  }
  std::uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  std::uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

std::uint16_t fp32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<std::uint16_t>((u >> 16) | 64);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

void dequantize_row(dtype t, const void* src, float* dst, std::int64_t n) {
  std::int64_t nb = n / block_elements(t);
  switch (t) {
    case dtype::f32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); break;
    case dtype::f16: {
      const auto* h = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      break;
    }
    case dtype::bf16: {
      const auto* h = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      break;
    }
    case dtype::q4_0: dequant_q4_0(static_cast<const block_q4_0*>(src), dst, nb); break;
    case dtype::q4_1: dequant_q4_1(static_cast<const block_q4_1*>(src), dst, nb); break;
    case dtype::q5_0: dequant_q5_0(static_cast<const block_q5_0*>(src), dst, nb); break;
    case dtype::q5_1: dequant_q5_1(static_cast<const block_q5_1*>(src), dst, nb); break;
    case dtype::iq4_nl: dequant_iq4_nl(static_cast<const block_iq4_nl*>(src), dst, nb); break;
    case dtype::mxfp4: dequant_mxfp4(static_cast<const block_mxfp4*>(src), dst, nb); break;
    case dtype::q8_0: dequant_q8_0(static_cast<const block_q8_0*>(src), dst, nb); break;
    case dtype::q4_k: dequant_k45(static_cast<const block_q4_k*>(src), dst, nb); break;
    case dtype::q5_k: dequant_k45(static_cast<const block_q5_k*>(src), dst, nb); break;
    case dtype::q6_k: dequant_q6_k(static_cast<const block_q6_k*>(src), dst, nb); break;
  }
}

void quantize_row(dtype t, const float* src, void* dst, std::int64_t n) {
  std::int64_t nb = n / block_elements(t);
  switch (t) {
    case dtype::f32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); break;
    case dtype::f16: {
      auto* h = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      break;
    }
    case dtype::bf16: {
      auto* h = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      break;
    }
    case dtype::q4_0: quant_q4_0(src, static_cast<block_q4_0*>(dst), nb); break;
    case dtype::q4_1: quant_with_min(src, static_cast<block_q4_1*>(dst), nb); break;
    case dtype::q5_0: quant_q5_0(src, static_cast<block_q5_0*>(dst), nb); break;
    case dtype::q5_1: quant_with_min(src, static_cast<block_q5_1*>(dst), nb); break;
    case dtype::iq4_nl: quant_iq4_nl(src, static_cast<block_iq4_nl*>(dst), nb); break;
    case dtype::mxfp4: quant_mxfp4(src, static_cast<block_mxfp4*>(dst), nb); break;
    case dtype::q8_0: quant_q8_0(src, static_cast<block_q8_0*>(dst), nb); break;
    case dtype::q4_k: quant_q4_k(src, static_cast<block_q4_k*>(dst), nb); break;
    case dtype::q5_k: quant_q5_k(src, static_cast<block_q5_k*>(dst), nb); break;
    case dtype::q6_k: quant_q6_k(src, static_cast<block_q6_k*>(dst), nb); break;
  }
}

}  // namespace strata::kernels
