#pragma once
// Row dots over GGUF weight blocks with 256-bit integer arithmetic, shared by the AVX2 and the
// AVX-512 kernel files. Each including file includes it inside its own #pragma GCC target and gets
// its own copy (everything here has internal linkage): with AVX-512 VNNI the byte products use
// vpdpbusd, otherwise vpmaddubsw + vpmaddwd. Include after <immintrin.h>, <cstring> and the
// kernels headers below, so that those are compiled for the baseline CPU.

#include <cstring>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels {
namespace {

/// acc + 8 lanes of sums of 4 products u8 * s8 (u at most 128, so the 16-bit pair sums of
/// vpmaddubsw cannot saturate).
inline __m256i mul_sum_us8(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

inline float hsum256(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline float half(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/// e^x to about 2 ulp for x in [-87, 88] (clamped outside): 2^n times a degree-6 polynomial of
/// the remainder r = x - n ln 2, |r| <= ln(2) / 2.
inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/// x / (1 + e^(-a x)) in place: SiLU for a = 1; the tanh GELU is x * sigmoid(2u) with
/// u = sqrt(2/pi) (x + 0.044715 x^3).
template <bool gelu_form>
void x86_sigmoid_gate(float* x, std::int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 t = v;
    if constexpr (gelu_form) {
      const __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
      t = _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), v3, v));
    }
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), t));
    _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  if (i < n) {
    if constexpr (gelu_form) {
      scalar::gelu(x + i, n - i);
    } else {
      scalar::silu(x + i, n - i);
    }
  }
}

/// The scalar quantize_groups with 256-bit vectors: the same float operations in the same order
/// (max is exact, then one multiply and a round to nearest even), so the same bytes.
void x86_quantize_groups(const float* x, std::int64_t k, int group, int sum_group, std::int8_t* qs, float* d,
                         std::int32_t* sums) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (std::int64_t g = 0; g < k / group; ++g) {
    const float* xg = x + g * group;
    __m256 mx = _mm256_setzero_ps();
    for (int j = 0; j < group; j += 8) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(xg + j)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    d[g] = amax / 127.0f;
    const __m256 iv = _mm256_set1_ps(inv);
    for (int j = 0; j < group; j += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j), iv));
      __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j + 8), iv));
      __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
      __m128i b8 = _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + g * group + j), b8);
    }
  }
  // Sums of 16 levels: bias to unsigned and let vpsadbw add them.
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  for (std::int64_t s = 0; s < k / 16; ++s) {
    __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * s)), bias);
    __m128i sad = _mm_sad_epu8(v, _mm_setzero_si128());
    const int t = _mm_cvtsi128_si32(sad) + _mm_extract_epi16(sad, 4) - 16 * 128;
    if (sum_group == 16) {
      sums[s] = t;
    } else if (s % 2 == 0) {
      sums[s / 2] = t;
    } else {
      sums[s / 2] += t;
    }
  }
}

[[maybe_unused]] float x86_dot_q8_0(const void* w, const act_row& x, std::int64_t k) {
  const auto* b = static_cast<const std::byte*>(w);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const std::int64_t nb = k / 32;
  std::int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const std::byte* b0 = b + i * 34;
    __m256i w0 = load256(b0 + 2), w1 = load256(b0 + 36);
    __m256i x0 = load256(x.qs + i * 32), x1 = load256(x.qs + i * 32 + 32);
    __m256i p0 = mul_sum_us8(_mm256_setzero_si256(), _mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
    __m256i p1 = mul_sum_us8(_mm256_setzero_si256(), _mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(half(b0) * x.d[i]), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(half(b0 + 34) * x.d[i + 1]), acc1);
  }
  for (; i < nb; ++i) {
    const std::byte* b0 = b + i * 34;
    __m256i w0 = load256(b0 + 2), x0 = load256(x.qs + i * 32);
    __m256i p0 = mul_sum_us8(_mm256_setzero_si256(), _mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(half(b0) * x.d[i]), acc0);
  }
  return hsum256(_mm256_add_ps(acc0, acc1));
}

/// The 32 nibbles (0..15) of a 4-bit block from its 16 bytes at qs: the low nibbles (elements
/// 0..15), then the high ones (16..31), the GGUF order.
inline __m256i nibbles256(const std::byte* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0xF));
}

/// Byte j is 0x10 where bit j of `bits` is set, else 0: a q5_0 / q5_1 block's fifth bits, in the
/// order of its levels.
inline __m256i fifth_bits(std::uint32_t bits) {
  // Byte j takes byte j / 8 of the word (pshufb within each 128-bit lane, which holds the word
  // four times), then tests its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

/// The 32 levels (0..31) of a q5_0 / q5_1 block from its 16 nibble bytes and its fifth bits.
inline __m256i q5_levels(const std::byte* qs, const std::byte* qh) {
  std::uint32_t h;
  std::memcpy(&h, qh, 4);
  return _mm256_or_si256(nibbles256(qs), fifth_bits(h));
}

/// The levels of one block of q4_0 / q4_1 / q5_0 / q5_1, from the block's start.
inline __m256i q4_0_levels(const std::byte* b) { return nibbles256(b + 2); }
inline __m256i q4_1_levels(const std::byte* b) { return nibbles256(b + 4); }
inline __m256i q5_0_levels(const std::byte* b) { return q5_levels(b + 6, b + 2); }
inline __m256i q5_1_levels(const std::byte* b) { return q5_levels(b + 8, b + 4); }

/// Blocks of 32 unsigned levels: the levels times the activations in integers, times d. q4_0
/// (bias 8) and q5_0 (bias 16) take the bias off as -bias d * (the block's activation sum); q4_1
/// and q5_1 (with_min) add the offset m of each block (the f16 after d) times that sum.
template <std::size_t bytes, __m256i (*levels)(const std::byte*), int bias, bool with_min = false>
float x86_dot_levels(const void* w, const act_row& x, std::int64_t k) {
  const auto* b = static_cast<const std::byte*>(w);
  __m256 acc = _mm256_setzero_ps();
  float extra = 0;
  for (std::int64_t i = 0; i < k / 32; ++i) {
    const std::byte* b0 = b + i * bytes;
    const __m256i p = mul_sum_us8(_mm256_setzero_si256(), levels(b0), load256(x.qs + i * 32));
    const float dx = x.d[i], s = half(b0) * dx;
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s), acc);
    if constexpr (with_min) {
      extra += half(b0 + 2) * dx * static_cast<float>(x.sums[i]);
    } else {
      extra -= s * static_cast<float>(bias * x.sums[i]);
    }
  }
  return hsum256(acc) + extra;
}

[[maybe_unused]] constexpr auto x86_dot_q4_0 = x86_dot_levels<18, q4_0_levels, 8>;
[[maybe_unused]] constexpr auto x86_dot_q5_0 = x86_dot_levels<22, q5_0_levels, 16>;
[[maybe_unused]] constexpr auto x86_dot_q4_1 = x86_dot_levels<20, q4_1_levels, 0, true>;
[[maybe_unused]] constexpr auto x86_dot_q5_1 = x86_dot_levels<24, q5_1_levels, 0, true>;

/// mxfp4's scale: the e8m0 byte at the block's start, halved (k_mxfp4_values are doubled).
inline float e8m0_half(const std::byte* p) { return e8m0_to_fp32_half(static_cast<std::uint8_t>(*p)); }

/// Blocks of a scale (scale_bytes long, read by `scale`) and 32 nibbles indexing 16 int8 levels
/// (iq4_nl, mxfp4): pshufb looks the nibbles up in the table (held in both 128-bit lanes), and
/// the int8 levels multiply the activations as in x86_dot_q8_0 (|w| against x with w's sign).
template <const std::int8_t* values, int scale_bytes, float (*scale)(const std::byte*)>
float x86_dot_table4(const void* w, const act_row& x, std::int64_t k) {
  const auto* b = static_cast<const std::byte*>(w);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < k / 32; ++i) {
    const std::byte* b0 = b + i * (scale_bytes + 16);
    const __m256i wq = _mm256_shuffle_epi8(table, nibbles256(b0 + scale_bytes));
    const __m256i xq = load256(x.qs + i * 32);
    const __m256i p = mul_sum_us8(_mm256_setzero_si256(), _mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(scale(b0) * x.d[i]), acc);
  }
  return hsum256(acc);
}
[[maybe_unused]] constexpr auto x86_dot_iq4_nl = x86_dot_table4<k_iq4_nl_values, 2, half>;
[[maybe_unused]] constexpr auto x86_dot_mxfp4 = x86_dot_table4<k_mxfp4_values, 1, e8m0_half>;

/// u8 * s8 products summed in pairs to 16 bits (no saturation for u below 64), then in pairs to
/// 32 bits with a 16-bit scale per pair.
inline __m256i scaled_sum_us8(__m256i u, __m256i s, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

/// The eight 6-bit scales and eight 6-bit mins of a q4_K / q5_K super-block, as bytes.
inline void k_scales_mins(const std::byte* p, std::uint32_t sc[2], std::uint32_t mn[2]) {
  std::uint32_t u[3];
  std::memcpy(u, p, 12);
  sc[0] = u[0] & 0x3F3F3F3Fu;
  mn[0] = u[1] & 0x3F3F3F3Fu;
  sc[1] = (u[2] & 0x0F0F0F0Fu) | ((u[0] & 0xC0C0C0C0u) >> 2);
  mn[1] = ((u[2] >> 4) & 0x0F0F0F0Fu) | ((u[1] & 0xC0C0C0C0u) >> 2);
}

/// pshufb indexes picking 16-bit word a in the low 128-bit lane and word b in the high one.
inline __m256i word_pick(int a, int b) {
  const __m128i lo = _mm_set1_epi16(static_cast<short>((2 * a) | ((2 * a + 1) << 8)));
  const __m128i hi = _mm_set1_epi16(static_cast<short>((2 * b) | ((2 * b + 1) << 8)));
  return _mm256_set_m128i(hi, lo);
}

/// q4_K (five = false) and q5_K.
template <bool five>
float x86_dot_k45(const void* w, const act_row& x, std::int64_t k) {
  constexpr std::size_t bsize = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
  constexpr std::size_t qs_at = five ? 48 : 16;
  const auto* base = static_cast<const std::byte*>(w);
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i sixteen = _mm256_set1_epi8(16);
  __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < k / 256; ++i) {
    const std::byte* b = base + static_cast<std::size_t>(i) * bsize;
    std::uint32_t sc[2], mn[2];
    k_scales_mins(b + 4, sc, mn);
    // Mins against the activation sums per 32 (pairs of the sums per 16).
    const std::int32_t* bs = x.sums + i * 16;
    __m256i s32 = _mm256_hadd_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs)),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs + 8)));
    s32 = _mm256_permute4x64_epi64(s32, 0xD8);  // sub-blocks 0..7 in order
    const __m256i mins = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(mn[1]), static_cast<int>(mn[0])));
    const float dx = x.d[i];
    acc_m = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mins, s32)), _mm256_set1_ps(half(b + 2) * dx), acc_m);
    // Scales as 16-bit words in both lanes.
    const __m256i sc16 = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(sc[1]), static_cast<int>(sc[0]))));
    const std::int8_t* xq = x.qs + i * 256;
    const __m256i qh = five ? load256(b + 16) : _mm256_setzero_si256();
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(b + qs_at + 32 * c);
      __m256i lo = _mm256_and_si256(q, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (five) {
        const __m256i m1 = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
        const __m256i m2 = _mm256_set1_epi8(static_cast<char>(2 << (2 * c)));
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m1), m1), sixteen));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m2), m2), sixteen));
      }
      const __m256i s_lo = _mm256_shuffle_epi8(sc16, word_pick(2 * c, 2 * c));
      const __m256i s_hi = _mm256_shuffle_epi8(sc16, word_pick(2 * c + 1, 2 * c + 1));
      isum = _mm256_add_epi32(isum, scaled_sum_us8(lo, load256(xq + 64 * c), s_lo));
      isum = _mm256_add_epi32(isum, scaled_sum_us8(hi, load256(xq + 64 * c + 32), s_hi));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(half(b) * dx), acc);
  }
  return hsum256(_mm256_sub_ps(acc, acc_m));
}

[[maybe_unused]] float x86_dot_q6_k(const void* w, const act_row& x, std::int64_t k) {
  const auto* base = static_cast<const std::byte*>(w);
  const __m256i low4 = _mm256_set1_epi8(0xF);
  const __m256i three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps(), acc_c = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < k / 256; ++i) {
    const std::byte* b = base + static_cast<std::size_t>(i) * sizeof(block_q6_k);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const float d = half(b + 208) * x.d[i];
    // The stored levels are q + 32: take out 32 * scale * (sum of x) per 16-value group.
    const std::int32_t* bs = x.sums + i * 16;
    __m256i corr = _mm256_add_epi32(
        _mm256_mullo_epi32(_mm256_cvtepi8_epi32(sc8), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs))),
        _mm256_mullo_epi32(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs + 8))));
    acc_c = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(32.0f * d), acc_c);
    const std::int8_t* xq = x.qs + i * 256;
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc8, 8) : sc8));
      const __m256i l0 = load256(b + 64 * h), l1 = load256(b + 64 * h + 32), qh = load256(b + 128 + 32 * h);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, three), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), three), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), three), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), three), 4)),
      };
#pragma GCC unroll 4
      for (int qd = 0; qd < 4; ++qd) {
        // Words 0..7 of the 16-bit products cover values 0..15 (scale 2qd), words 8..15 the rest.
        const __m256i s = _mm256_shuffle_epi8(sc16, word_pick(2 * qd, 2 * qd + 1));
        isum = _mm256_add_epi32(isum, scaled_sum_us8(q[qd], load256(xq + 128 * h + 32 * qd), s));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
  }
  return hsum256(_mm256_sub_ps(acc, acc_c));
}

}  // namespace
}  // namespace strata::kernels
