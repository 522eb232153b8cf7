// AVX-512 (F, BW, VL, DQ, VNNI) variants. Tails use masked loads, so every length takes the
// vector path. Byte products use vpdpbusd. The target is set for the kernels only, between
// push_options and pop_options: the headers above it (whose inline functions the linker may share
// with other files) and fill_table below it are compiled for the baseline CPU, so that filling the
// table runs on any CPU (compiled for AVX-512, the fill stored its pointers with zmm moves and
// died of SIGILL where AVX-512 is missing); the kernels run only where
// simd_level_enabled(avx512) said so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#include "kernels/avx512_packed.hpp"
#include "kernels/avx512_tiles.hpp"
#include "kernels/x86_row_dots.hpp"

namespace strata::kernels::avx512 {
namespace {

float dot(const float* a, const float* b, std::int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

inline __m512 load_f16(__mmask16 m, const std::uint16_t* p) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load_bf16(__mmask16 m, const std::uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

/// A float weight row (f32 in place, f16 or bf16 widened by `load`) against f32 activations: one
/// running sum over 16-value pieces in order (the last one masked), then its lane sum; the very
/// operations of micro's tiles for each output. Decode streams weights from memory, so the one
/// FMA chain costs it nothing.
template <__m512 (*load)(__mmask16, const void*, std::int64_t)>
float row_dot_f(const void* w, const act_row& x, std::int64_t k) {
  __m512 s = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < k; i += 16) {
    const __mmask16 m = tail_mask(k - i);
    s = _mm512_fmadd_ps(load(m, w, i), _mm512_maskz_loadu_ps(m, x.f + i), s);
  }
  return _mm512_reduce_add_ps(s);
}
inline __m512 piece_f32(__mmask16 m, const void* w, std::int64_t i) { return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i); }
inline __m512 piece_f16(__mmask16 m, const void* w, std::int64_t i) { return load_f16(m, static_cast<const std::uint16_t*>(w) + i); }
inline __m512 piece_bf16(__mmask16 m, const void* w, std::int64_t i) { return load_bf16(m, static_cast<const std::uint16_t*>(w) + i); }

void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load_f16(m, src + i));
  }
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

void axpy(float a, const float* x, float* y, std::int64_t n) {
  __m512 av = _mm512_set1_ps(a);
  for (std::int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

/// rms_norm with scalar::rms_norm's very operations: its 16 running sums of the squares in double
/// are the lanes of two vectors of 8 (a square of a float is exact in double, so an FMA rounds
/// each addition as the scalar one does; the tail's missing lanes add +0), added pairwise in the
/// same order; then y = (x * s) * weight.
void rms_norm(const float* x, const float* weight, float* y, std::int64_t n, float eps) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();  // lanes 0..7 and 8..15
  for (std::int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    const __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    lo = _mm512_fmadd_pd(a, a, lo);
    hi = _mm512_fmadd_pd(b, b, hi);
  }
  const __m512d w8 = _mm512_add_pd(lo, hi);
  const __m256d w4 = _mm256_add_pd(_mm512_castpd512_pd256(w8), _mm512_extractf64x4_pd(w8, 1));
  const __m128d w2 = _mm_add_pd(_mm256_castpd256_pd128(w4), _mm256_extractf128_pd(w4, 1));
  const double ss = _mm_cvtsd_f64(_mm_add_sd(w2, _mm_unpackhi_pd(w2, w2)));
  const float s = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  const __m512 sv = _mm512_set1_ps(s);
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv);
    if (weight) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

/// R weight rows x C activation rows with FMA; k a multiple of 16. Each output is one running sum
/// over the 16-value pieces in order and then its lane sum: the operations of row_dot_f, so that a
/// row gets the same bits from these tiles (prefill) as from the row dots (decode, small batches).
template <int R, int C>
void micro(const float* w, const float* x, std::int64_t k, float* y, std::int64_t ldy) {
  // Fully unrolled so that the accumulators stay in registers.
  __m512 acc[C][R];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[c][r] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < k; i += 16) {
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_ps(w + r * k + i);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 xv = _mm512_loadu_ps(x + c * k + i);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[c][r] = _mm512_fmadd_ps(wv[r], xv, acc[c][r]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[c * ldy + r] = _mm512_reduce_add_ps(acc[c][r]);
}

using micro_fn = void (*)(const float*, const float*, std::int64_t, float*, std::int64_t);
constexpr micro_fn k_micro[4][6] = {
    {micro<1, 1>, micro<1, 2>, micro<1, 3>, micro<1, 4>, micro<1, 5>, micro<1, 6>},
    {micro<2, 1>, micro<2, 2>, micro<2, 3>, micro<2, 4>, micro<2, 5>, micro<2, 6>},
    {micro<3, 1>, micro<3, 2>, micro<3, 3>, micro<3, 4>, micro<3, 5>, micro<3, 6>},
    {micro<4, 1>, micro<4, 2>, micro<4, 3>, micro<4, 4>, micro<4, 5>, micro<4, 6>},
};

void gemm_f32(const float* w, const float* x, std::int64_t k, int nr, int nc, float* y, std::int64_t ldy) {
  constexpr int step_c = 6, step_r = 4;
  for (int c = 0; c < nc; c += step_c) {
    const int cc = std::min(step_c, nc - c);
    for (int r = 0; r < nr; r += step_r) {
      const int rr = std::min(step_r, nr - r);
      k_micro[rr - 1][cc - 1](w + r * k, x + c * k, k, y + c * ldy + r, ldy);
    }
  }
}

/// One q4_K / q5_K super-block of a weight row as k45_tile uses it (k45_decode): the levels and
/// sub-block scales of its four groups, its mins, d and -dmin.
struct decoded_k45 {
  __m512i u[4], s[4];
  __m256i mins;
  float d, ndmin;
};

/// A super-block's scales (of sub-blocks 0..7 in the low 8 lanes, in both 16-bit halves of each),
/// mins, d and -dmin.
[[gnu::always_inline]] inline void k45_scales(const std::byte* b, __m512i& scs, __m256i& mins, float& d, float& ndmin) {
  std::uint32_t sc[2], mn[2];
  k_scales_mins(b + 4, sc, mn);
  scs = _mm512_castsi256_si512(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(sc[1]), static_cast<int>(sc[0]))));
  scs = _mm512_or_si512(scs, _mm512_slli_epi32(scs, 16));  // the scale in both 16-bit halves
  mins = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(mn[1]), static_cast<int>(mn[0])));
  d = half(b);
  ndmin = -half(b + 2);
}

/// Group g's levels u (sub-blocks ja and ja + 2, ja = 4 (g / 2) + g % 2) of the super-block at b,
/// and their scales s picked from scs.
template <bool five>
[[gnu::always_inline]] inline void k45_group(const std::byte* b, int g, const __m512i& scs, __m512i& u, __m512i& s) {
  constexpr std::size_t qs_at = five ? 48 : 16;
  const int ja = 4 * (g / 2) + g % 2;
  const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi32(ja), _mm256_set1_epi32(ja + 2), 1);
  const __m512i low4 = _mm512_set1_epi8(0xF);
  const __m512i q = _mm512_loadu_si512(b + qs_at + 64 * (g / 2));
  u = g % 2 ? _mm512_and_si512(_mm512_srli_epi16(q, 4), low4) : _mm512_and_si512(q, low4);
  if constexpr (five) {
    // Sub-block j takes bit j of qh[l] as 16.
    const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << ja)),
                                            _mm256_set1_epi8(static_cast<char>(1 << (ja + 2))), 1);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
    u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(qh, bits), u, _mm512_set1_epi8(16));
  }
  s = _mm512_permutexvar_epi32(pick, scs);
}

/// Decodes nr q4_K / q5_K weight rows of k values into out, k / 256 decoded_k45 a row.
template <bool five>
void k45_decode(const std::byte* w, std::size_t w_stride, int nr, std::int64_t k, std::byte* out) {
  constexpr std::size_t bsize = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
  auto* o = reinterpret_cast<decoded_k45*>(out);
  for (int r = 0; r < nr; ++r) {
    for (std::int64_t i = 0; i < k / 256; ++i, ++o) {
      const std::byte* b = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(i) * bsize;
      __m512i scs;
      k45_scales(b, scs, o->mins, o->d, o->ndmin);
      for (int g = 0; g < 4; ++g) k45_group<five>(b, g, scs, o->u[g], o->s[g]);
    }
  }
}

/// q4_K (five = false) and q5_K weights against q8_256 activations, R weight rows x C activation
/// rows. A super-block is four groups of 64 values, each two sub-blocks of 32 in one register:
/// group g holds sub-blocks (0,2), (1,3), (4,6), (5,7); the mins enter as one more product per
/// super-block (8 mins x the activation sums per 32). The products of a super-block are summed in
/// integers: vpmaddubsw makes 16-bit sums of two (at most 2 x 31 x 127, no saturation), and
/// vpdpwssd multiplies each by its sub-block's scale (in both 16-bit halves of a lane) and adds
/// them up, at most 2^22 in a lane; two instructions where a 4-byte dot, a 32-bit multiply and an
/// add took four. The sum is turned to float once, times d. As with pair_tile, each (row, column)
/// pair runs the same operations whatever R and C are. `Decoded`: the rows are k45_decode's.
template <bool five, int R, int C, bool Decoded = false>
void k45_tile(const std::byte* w, std::size_t w_stride, const act_row* x, std::int64_t k, float* y, std::int64_t ldy) {
  constexpr std::size_t bsize = Decoded ? sizeof(decoded_k45) : five ? sizeof(block_q5_k) : sizeof(block_q4_k);
  __m512 acc[R][C];
  zero_tile(acc);
  for (std::int64_t i = 0; i < k / 256; ++i) {
    __m512i scs[R];  // scales of sub-blocks 0..7 in the low 8 lanes
    __m256i mins[R];
    float d[R], ndmin[R];
    __m512i dot[R][C];
    const std::byte* at_r[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      at_r[r] = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(i) * bsize;
      if constexpr (Decoded) {
        const auto* o = reinterpret_cast<const decoded_k45*>(at_r[r]);
        mins[r] = o->mins;
        d[r] = o->d;
        ndmin[r] = o->ndmin;
      } else {
        k45_scales(at_r[r], scs[r], mins[r], d[r], ndmin[r]);
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) dot[r][c] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      __m512i u[R], s[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (Decoded) {
          u[r] = reinterpret_cast<const decoded_k45*>(at_r[r])->u[g];
          s[r] = reinterpret_cast<const decoded_k45*>(at_r[r])->s[g];
        } else {
          k45_group<five>(at_r[r], g, scs[r], u[r], s[r]);
        }
      }
      const std::int64_t at = 256 * i + 128 * (g / 2) + 32 * (g % 2);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i xv = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[c].qs + at))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[c].qs + at + 64)), 1);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          dot[r][c] = _mm512_dpwssd_epi32(dot[r][c], _mm512_maddubs_epi16(u[r], xv), s[r]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const std::int32_t* bs = x[c].sums + i * 16;
      __m256i s32 = _mm256_hadd_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs)),
                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs + 8)));
      s32 = _mm256_permute4x64_epi64(s32, 0xD8);  // sub-blocks 0..7 in order
      const float dx = x[c].d[i];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][c]), _mm512_set1_ps(d[r] * dx), acc[r][c]);
        const __m512 m = _mm512_zextps256_ps512(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mins[r], s32)));
        acc[r][c] = _mm512_fmadd_ps(m, _mm512_set1_ps(ndmin[r] * dx), acc[r][c]);
      }
    }
  }
  store_tile(acc, y, ldy);
}


/// k45_tile as a tile family, with decoded tiles (see decodable).
template <bool five>
struct k45_family {
  template <int R, int C>
  static constexpr tile_fn tile = k45_tile<five, R, C>;
  static constexpr bool decodable = true;
  template <int R, int C>
  static constexpr tile_fn decoded = k45_tile<five, R, C, true>;
  static std::size_t decoded_row_bytes(std::int64_t k) { return static_cast<std::size_t>(k / 256) * sizeof(decoded_k45); }
  static void decode(const std::byte* w, std::size_t w_stride, int nr, std::int64_t k, std::byte* out) {
    k45_decode<five>(w, w_stride, nr, k, out);
  }
};

/// q6_K weights against q8_256 activations, R x C. Group t (0..3) is the 64 values from 64 t, in
/// order: two quarters of one half of the block (low or high nibbles of 64 ql bytes, with 2-bit
/// pairs of qh). Each 16 values share scales[v / 16]; the stored levels are q + 32, so
/// 32 * scale * (activation sum per 16) comes off once per super-block. A super-block is summed
/// in integers, then turned to float once: vpmaddubsw makes 16-bit sums of two products (at most
/// 2 x 63 x 127, no saturation) and vpdpwssd multiplies them by their signed 8-bit scale and adds
/// them into the lane (under 2^25 with the offset taken off).
template <int R, int C>
void q6_k_tile(const std::byte* w, std::size_t w_stride, const act_row* x, std::int64_t k, float* y, std::int64_t ldy) {
  __m512 acc[R][C];
  zero_tile(acc);
  const __m512i low4 = _mm512_set1_epi8(0xF);
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (std::int64_t i = 0; i < k / 256; ++i) {
    __m512i sc[R], sc16[R];  // scales[j], j = 0..15: in 32-bit lanes, and in both 16-bit halves of them
    float d[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::byte* b = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(i) * sizeof(block_q6_k);
      sc[r] = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
      sc16[r] = _mm512_or_si512(_mm512_and_si512(sc[r], low16), _mm512_slli_epi32(sc[r], 16));  // in both halves
      d[r] = half(b + 208);
    }
    __m512i dot[R][C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      // The +32 offset of the levels: 32 * scale * (sum of the 16 activations it covers).
      const __m512i sums = _mm512_loadu_si512(x[c].sums + i * 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) dot[r][c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_mullo_epi32(sc[r], sums), 5));
    }
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const int h = t / 2, hi = t % 2;
      const __m512i pick = _mm512_set_epi32(4 * t + 3, 4 * t + 3, 4 * t + 3, 4 * t + 3, 4 * t + 2, 4 * t + 2, 4 * t + 2,
                                            4 * t + 2, 4 * t + 1, 4 * t + 1, 4 * t + 1, 4 * t + 1, 4 * t, 4 * t, 4 * t, 4 * t);
      __m512i u[R], s[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const std::byte* b = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(i) * sizeof(block_q6_k);
        const __m512i l = _mm512_loadu_si512(b + 64 * h);
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
        // Quarters 2 hi and 2 hi + 1 take qh bits (4 hi, 4 hi + 1) and (4 hi + 2, 4 hi + 3).
        const __m256i qa = hi ? _mm256_srli_epi16(qh, 4) : qh;
        const __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(qa), _mm256_srli_epi16(qa, 2), 1);
        const __m512i lo = hi ? _mm512_and_si512(_mm512_srli_epi16(l, 4), low4) : _mm512_and_si512(l, low4);
        u[r] = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(hb, three), 4));
        s[r] = _mm512_permutexvar_epi32(pick, sc16[r]);
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i xv = _mm512_loadu_si512(x[c].qs + 256 * i + 64 * t);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) dot[r][c] = _mm512_dpwssd_epi32(dot[r][c], _mm512_maddubs_epi16(u[r], xv), s[r]);
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][c]), _mm512_set1_ps(d[r] * x[c].d[i]), acc[r][c]);
  }
  store_tile(acc, y, ldy);
}


/// q6_k_tile as a tile family.
struct q6_k_family {
  template <int R, int C>
  static constexpr tile_fn tile = q6_k_tile<R, C>;
};

/// U loads of 64 bytes per iteration into U sums.
template <int U>
std::uint64_t sum_words(const std::uint64_t* p, std::int64_t n) {
  __m512i s[U] = {};
  for (std::int64_t i = 0; i + 8 * U <= n; i += 8 * U)
#pragma GCC unroll 4
    for (int j = 0; j < U; ++j) s[j] = _mm512_add_epi64(s[j], _mm512_loadu_si512(p + i + 8 * j));
  for (int j = 1; j < U; ++j) s[0] = _mm512_add_epi64(s[0], s[j]);
  // Lanes summed as unsigned words (the reduce intrinsic adds signed ones, whose wrap is undefined).
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, s[0]);
  std::uint64_t sum = 0;
  for (std::uint64_t l : lanes) sum += l;
  return sum;
}

}  // namespace
}  // namespace strata::kernels::avx512

#pragma GCC pop_options

namespace strata::kernels::avx512 {

void fill_table(kernel_table& t) {
  t.sum_words[0] = sum_words<1>;
  t.sum_words[1] = sum_words<2>;
  t.sum_words[2] = sum_words<4>;
  t.f32_to_f16 = f32_to_f16;
  t.dot = dot;
  t.f16_to_f32 = f16_to_f32;
  t.axpy = axpy;
  t.quantize_groups = x86_quantize_groups;
  t.silu = x86_sigmoid_gate<false>;
  t.gelu = x86_sigmoid_gate<true>;
  t.rms_norm = rms_norm;
  t.row_dot[dtype_slot(dtype::f32)] = row_dot_f<piece_f32>;
  t.row_dot[dtype_slot(dtype::f16)] = row_dot_f<piece_f16>;
  t.row_dot[dtype_slot(dtype::bf16)] = row_dot_f<piece_bf16>;
  t.row_dot[dtype_slot(dtype::q4_0)] = tile_dot<pair_family<q4_0_pair>>;
  t.row_dot[dtype_slot(dtype::q4_1)] = tile_dot<pair_family<q4_1_pair>>;
  t.row_dot[dtype_slot(dtype::q5_0)] = tile_dot<pair_family<q5_0_pair>>;
  t.row_dot[dtype_slot(dtype::q5_1)] = tile_dot<pair_family<q5_1_pair>>;
  t.row_dot[dtype_slot(dtype::iq4_nl)] = tile_dot<pair_family<iq4_nl_pair>>;
  t.row_dot[dtype_slot(dtype::mxfp4)] = tile_dot<pair_family<mxfp4_pair>>;
  t.row_dot[dtype_slot(dtype::q8_0)] = tile_dot<pair_family<q8_0_pair>>;
  t.row_dot[dtype_slot(dtype::q4_k)] = tile_dot<k45_family<false>>;
  t.row_dot[dtype_slot(dtype::q5_k)] = tile_dot<k45_family<true>>;
  t.row_dot[dtype_slot(dtype::q6_k)] = tile_dot<q6_k_family>;
  t.row_gemm[dtype_slot(dtype::q4_0)] = tile_gemm<pair_family<q4_0_pair>>;
  t.row_gemm[dtype_slot(dtype::q4_1)] = tile_gemm<pair_family<q4_1_pair>>;
  t.row_gemm[dtype_slot(dtype::q5_0)] = tile_gemm<pair_family<q5_0_pair>>;
  t.row_gemm[dtype_slot(dtype::q5_1)] = tile_gemm<pair_family<q5_1_pair>>;
  t.row_gemm[dtype_slot(dtype::iq4_nl)] = tile_gemm<pair_family<iq4_nl_pair>>;
  t.row_gemm[dtype_slot(dtype::mxfp4)] = tile_gemm<pair_family<mxfp4_pair>>;
  t.row_gemm[dtype_slot(dtype::q8_0)] = tile_gemm<pair_family<q8_0_pair>, false>;
  t.row_gemm[dtype_slot(dtype::q4_k)] = tile_gemm<k45_family<false>>;
  t.row_gemm[dtype_slot(dtype::q5_k)] = tile_gemm<k45_family<true>>;
  t.row_gemm[dtype_slot(dtype::q6_k)] = tile_gemm<q6_k_family>;
  t.gemm_f32 = gemm_f32;
  t.packed_gemm[dtype_slot(dtype::q8_0)] = x16_gemm<x16_q8_0>;
  t.packed_gemm[dtype_slot(dtype::q4_0)] = x16_gemm<x16_q4_0>;
  t.packed_gemm[dtype_slot(dtype::q4_1)] = x16_gemm<x16_q4_1>;
  t.packed_gemm[dtype_slot(dtype::q5_0)] = x16_gemm<x16_q5_0>;
  t.packed_gemm[dtype_slot(dtype::q5_1)] = x16_gemm<x16_q5_1>;
  t.packed_gemm[dtype_slot(dtype::iq4_nl)] = x16_gemm<x16_iq4_nl>;
  t.packed_gemm[dtype_slot(dtype::mxfp4)] = x16_gemm<x16_mxfp4>;
  t.packed_gemm[dtype_slot(dtype::q4_k)] = x16_gemm<x16_q4_k>;
  t.packed_gemm[dtype_slot(dtype::q6_k)] = x16_gemm<x16_q6_k>;
}

}  // namespace strata::kernels::avx512
