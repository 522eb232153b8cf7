// AVX-512 (F, BW, VL, DQ, VNNI) variants. Tails use masked loads, so every length takes the
// vector path. Byte products use vpdpbusd. The target is set for the kernels only, between
// push_options and pop_options: the headers above it (whose inline functions the linker may share
// with other files) and fill_table below it are compiled for the baseline CPU, so that filling the
// table runs on any CPU (compiled for AVX-512, the fill stored its pointers with zmm moves and
// died of SIGILL where AVX-512 is missing); the kernels run only where
// simd_level_enabled(avx512) said so.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#include "kernels/x86_row_dots.hpp"

namespace strata::kernels::avx512 {
namespace {

inline __mmask16 tail_mask(std::int64_t left) { return static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1); }

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

template <__m512 (*load)(__mmask16, const std::uint16_t*)>
float dot_half(const void* w, const act_row& x, std::int64_t k) {
  const auto* h = static_cast<const std::uint16_t*>(w);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    s0 = _mm512_fmadd_ps(load(0xFFFF, h + i), _mm512_loadu_ps(x.f + i), s0);
    s1 = _mm512_fmadd_ps(load(0xFFFF, h + i + 16), _mm512_loadu_ps(x.f + i + 16), s1);
  }
  for (; i < k; i += 16) {
    __mmask16 m = tail_mask(k - i);
    s0 = _mm512_fmadd_ps(load(m, h + i), _mm512_maskz_loadu_ps(m, x.f + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

float dot_f32(const void* w, const act_row& x, std::int64_t k) { return dot(static_cast<const float*>(w), x.f, k); }

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

/// {sum a, sum b, sum c, sum d}
inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a0+a2 b0+b2 a1+a3 b1+b3
  __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  __m512 lo = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd)));
  __m512 hi = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd)));
  __m512 s = _mm512_add_ps(lo, hi);  // per 128-bit lane: a b c d
  __m256 s2 = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
  return _mm_add_ps(_mm256_castps256_ps128(s2), _mm256_extractf128_ps(s2, 1));
}

/// R weight rows x C activation rows with FMA; k a multiple of 16.
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
  for (int c = 0; c < C; ++c) {
    if constexpr (R == 4) {
      _mm_storeu_ps(y + c * ldy, reduce4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]));
    } else {
      for (int r = 0; r < R; ++r) y[c * ldy + r] = _mm512_reduce_add_ps(acc[c][r]);
    }
  }
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

/// Sets an R x C tile of accumulators to zero.
template <int R, int C>
[[gnu::always_inline]] inline void zero_tile(__m512 (&acc)[R][C]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
}

/// Stores the lane sums of an R x C tile of accumulators: y[c * ldy + r].
template <int R, int C>
[[gnu::always_inline]] inline void store_tile(const __m512 (&acc)[R][C], float* y, std::int64_t ldy) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[c * ldy + r] = _mm512_reduce_add_ps(acc[r][c]);
}

/// A tile kernel: R weight rows x C activation rows, R and C in 1..4, picked from a table.
using tile_fn = void (*)(const std::byte*, std::size_t, const act_row*, std::int64_t, float*, std::int64_t);

/// Weight rows per tile. A single activation row (decode) runs one weight row at a time: every
/// weight row is its own stream through memory, and four streams per core outrun the hardware
/// prefetchers (a q6_K GEMV went from 26 to 51 GB/s this way), while the per-row decode state of
/// four rows does not fit the registers next to the accumulators anyway. With several activation
/// rows, four weight rows share each activation load.
inline int tile_rows(int nc) { return nc == 1 ? 1 : 4; }

/// Covers the nr x nc output with the table's tiles, up to `max_r` weight rows and 4 activation
/// rows at a time.
void run_tiles(const tile_fn (&tiles)[4][4], int max_r, const void* w, std::size_t w_stride, int nr,
               const act_row* x, int nc, std::int64_t k, float* y, std::int64_t ldy) {
  const auto* wb = static_cast<const std::byte*>(w);
  for (int c = 0; c < nc; c += 4) {
    const int cc = std::min(4, nc - c);
    for (int r = 0; r < nr; r += max_r) {
      const int rr = std::min(max_r, nr - r);
      tiles[rr - 1][cc - 1](wb + static_cast<std::size_t>(r) * w_stride, w_stride, x + c, k, y + c * ldy + r, ldy);
    }
  }
}

/// One tile family (a member template `tile<R, C>`) as a row dot: its 1 x 1 tile, so that the
/// GEMV and the GEMM tiles give bit-identical results.
template <class Family>
float tile_dot(const void* w, const act_row& x, std::int64_t k) {
  float y;
  Family::template tile<1, 1>(static_cast<const std::byte*>(w), 0, &x, k, &y, 1);
  return y;
}

/// One tile family as a row GEMM: its 4 x 4 table of tiles, run by run_tiles. `by_row`: decode
/// takes one weight row at a time (tile_rows); without it, always four.
template <class Family, bool by_row = true>
void tile_gemm(const void* w, std::size_t w_stride, int nr, const act_row* x, int nc, std::int64_t k, float* y,
               std::int64_t ldy) {
  static constexpr tile_fn tiles[4][4] = {
      {Family::template tile<1, 1>, Family::template tile<1, 2>, Family::template tile<1, 3>, Family::template tile<1, 4>},
      {Family::template tile<2, 1>, Family::template tile<2, 2>, Family::template tile<2, 3>, Family::template tile<2, 4>},
      {Family::template tile<3, 1>, Family::template tile<3, 2>, Family::template tile<3, 3>, Family::template tile<3, 4>},
      {Family::template tile<4, 1>, Family::template tile<4, 2>, Family::template tile<4, 3>, Family::template tile<4, 4>},
  };
  run_tiles(tiles, by_row ? tile_rows(nc) : 4, w, w_stride, nr, x, nc, k, y, ldy);
}

/// The 16 quant bytes at p and at p + bytes (zero where !two) as 64 nibbles: per block, the low
/// nibbles (elements 0..15) then the high ones (16..31), the GGUF order.
[[gnu::always_inline]] inline __m512i nibble_pair(const std::byte* p, std::size_t bytes, bool two) {
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i q1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bytes)) : _mm_setzero_si128();
  const __m256i v0 = _mm256_set_m128i(_mm_srli_epi16(q0, 4), q0);
  const __m256i v1 = _mm256_set_m128i(_mm_srli_epi16(q1, 4), q1);
  return _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1), _mm512_set1_epi8(0xF));
}

/// q5_0 / q5_1 levels of two blocks: the nibbles at p + qs_at, plus 16 where the fifth bit (the
/// 32-bit qh at p + qh_at, one 64-bit mask for the two blocks) is set.
template <std::size_t bytes, std::size_t qh_at, std::size_t qs_at>
[[gnu::always_inline]] inline __m512i q5_pair(const std::byte* p, bool two) {
  std::uint32_t qh0, qh1 = 0;
  std::memcpy(&qh0, p + qh_at, 4);
  if (two) std::memcpy(&qh1, p + bytes + qh_at, 4);
  const __mmask64 fifth = static_cast<__mmask64>(qh0) | (static_cast<__mmask64>(qh1) << 32);
  const __m512i nibbles = nibble_pair(p + qs_at, bytes, two);
  return _mm512_mask_add_epi8(nibbles, fifth, nibbles, _mm512_set1_epi8(16));
}

/// q8_0: the int8 levels of two blocks, signed (pair_tile takes |w| and moves the sign onto x).
struct q8_0_pair {
  static constexpr std::size_t bytes = 34;
  static constexpr int offset = 0;
  static constexpr bool signed_levels = true, has_mins = false;
  static __m512i levels(const std::byte* p, bool two) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 36)) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
};

/// q4_0: the nibbles are the unsigned operand of vpdpbusd and the -8 offset comes in as
/// -8 * (sum of the activation block).
struct q4_0_pair {
  static constexpr std::size_t bytes = 18;
  static constexpr int offset = -8;
  static constexpr bool signed_levels = false, has_mins = false;
  static __m512i levels(const std::byte* p, bool two) { return nibble_pair(p + 2, bytes, two); }
};

/// iq4_nl: vpshufb looks the nibbles up in k_iq4_nl_values + 128 (held in each 128-bit lane),
/// unsigned levels 1..241 for vpdpbusd (whose 32-bit sums cannot saturate), and the + 128 comes
/// back off as -128 * (sum of the activation block).
struct iq4_nl_pair {
  static constexpr std::size_t bytes = 18;
  static constexpr int offset = -128;
  static constexpr bool signed_levels = false, has_mins = false;
  static __m512i levels(const std::byte* p, bool two) {
    // Adding 128 to an int8 level flips its top bit.
    const __m512i table = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k_iq4_nl_values)),
                                                               _mm_set1_epi8(static_cast<char>(0x80))));
    return _mm512_shuffle_epi8(table, nibble_pair(p + 2, bytes, two));
  }
};

/// q5_0: q4_0 with the fifth bits adding 16 to their levels, and a -16 offset.
struct q5_0_pair {
  static constexpr std::size_t bytes = 22;
  static constexpr int offset = -16;
  static constexpr bool signed_levels = false, has_mins = false;
  static __m512i levels(const std::byte* p, bool two) { return q5_pair<bytes, 2, 6>(p, two); }
};

/// Vector j (words 32 j .. 32 j + 31) of the first min(16, left) blocks of `words` 16-bit words
/// each at p; words past them read as 0.
inline __m512i block_words(const std::byte* p, int words, std::int64_t left, int j) {
  const int n = std::clamp(words * static_cast<int>(std::min<std::int64_t>(16, left)) - 32 * j, 0, 32);
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>(n == 32 ? ~0u : (1u << n) - 1), p + 64 * j);
}

/// The offsets m of q4_1 blocks b..b+15 of a row (fewer at its end: the rest are 0), as f32. The
/// 16 blocks are 320 bytes, read as five vectors of 32 words; block i's m is word 10 i + 1, and
/// three word permutes pick them out (the first two from pairs of the vectors).
inline __m512 q4_1_mins16(const std::byte* p, std::int64_t left) {
  auto load = [&](int j) { return block_words(p, 10, left, j); };
  // Lane i takes word 10 i + 1 of the 160: blocks 0..6 from vectors 0 and 1, 7..12 from 2 and 3
  // (counted from word 64), 13..15 from 4 (from word 128).
  const __m512i at = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      23, 13, 3, 57, 47, 37, 27, 17, 7, 61, 51, 41, 31, 21, 11, 1);
  const __m512i a = _mm512_maskz_permutex2var_epi16(0x007F, load(0), at, load(1));
  const __m512i b = _mm512_maskz_permutex2var_epi16(0x1F80, load(2), at, load(3));
  const __m512i c = _mm512_maskz_permutexvar_epi16(0xE000, at, load(4));
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_or_si512(_mm512_or_si512(a, b), c)));
}

/// q4_1: q4_0's nibbles without the -8; the offsets m are a product of their own (has_mins).
struct q4_1_pair {
  static constexpr std::size_t bytes = 20;
  static constexpr int offset = 0;
  static constexpr bool signed_levels = false, has_mins = true;
  static __m512i levels(const std::byte* p, bool two) { return nibble_pair(p + 4, bytes, two); }
  static __m512 mins16(const std::byte* p, std::int64_t left) { return q4_1_mins16(p, left); }
};

/// The offsets m of q5_1 blocks b..b+15 of a row (fewer at its end: the rest are 0), as f32, as
/// q4_1_mins16 does for 20-byte blocks. The 16 blocks are 384 bytes, six vectors of 32 words;
/// block i's m is word 12 i + 1, and each pair of vectors holds five or six of them.
inline __m512 q5_1_mins16(const std::byte* p, std::int64_t left) {
  auto load = [&](int j) { return block_words(p, 12, left, j); };
  // Lane i takes word 12 i + 1 of the 192: blocks 0..5 from vectors 0 and 1, 6..10 from 2 and 3
  // (counted from word 64), 11..15 from 4 and 5 (from word 128).
  const __m512i at = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      53, 41, 29, 17, 5, 57, 45, 33, 21, 9, 61, 49, 37, 25, 13, 1);
  const __m512i a = _mm512_maskz_permutex2var_epi16(0x003F, load(0), at, load(1));
  const __m512i b = _mm512_maskz_permutex2var_epi16(0x07C0, load(2), at, load(3));
  const __m512i c = _mm512_maskz_permutex2var_epi16(0xF800, load(4), at, load(5));
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_or_si512(_mm512_or_si512(a, b), c)));
}

/// q5_1: q4_1's offsets with q5_0's levels.
struct q5_1_pair {
  static constexpr std::size_t bytes = 24;
  static constexpr int offset = 0;
  static constexpr bool signed_levels = false, has_mins = true;
  static __m512i levels(const std::byte* p, bool two) { return q5_pair<bytes, 4, 8>(p, two); }
  static __m512 mins16(const std::byte* p, std::int64_t left) { return q5_1_mins16(p, left); }
};

/// Weights of 32-value blocks (Format: one of the *_pair structs above, each block an f16 scale
/// d first) against q8_32 activations, R weight rows x C activation rows, two blocks (64 values)
/// per step. Each (row, column) pair runs the same operations whatever R and C are (vpdpbusd of
/// the levels, one scale per block, one f32 accumulator), so the GEMV (1 x 1) and the GEMM tiles
/// give bit-identical results. Signed levels (q8_0) go in as |w| with x negated where w < 0. A
/// constant offset per level comes in as offset * (sum of the activation block), the starting
/// value in the first lane of each block. Offsets m per block (has_mins) are a product of their
/// own, sum over blocks of m times d_x * (sum of the activation block), taken first with 16 blocks
/// to a vector: one FMA per 16 blocks, where adding each block's m term in the level loop took
/// one per two.
template <class Format, int R, int C>
void pair_tile(const std::byte* w, std::size_t w_stride, const act_row* x, std::int64_t k, float* y, std::int64_t ldy) {
  constexpr std::size_t bytes = Format::bytes;
  __m512 acc[R][C];
  zero_tile(acc);
  const std::int64_t nb = k / 32;
  if constexpr (Format::has_mins) {
    for (std::int64_t b = 0; b < nb; b += 16) {
      const __mmask16 mask = tail_mask(nb - b);
      __m512 t[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        t[c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x[c].d + b), _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(mask, x[c].sums + b)));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 m = Format::mins16(w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(b) * bytes, nb - b);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(m, t[c], acc[r][c]);
      }
    }
  }
  for (std::int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    __m512i u[R];
    [[maybe_unused]] __mmask64 neg[R];
    __m512 sw[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::byte* p = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(b) * bytes;
      u[r] = Format::levels(p, two);
      if constexpr (Format::signed_levels) {
        neg[r] = _mm512_movepi8_mask(u[r]);
        u[r] = _mm512_abs_epi8(u[r]);
      }
      std::uint16_t h0, h1 = 0;
      std::memcpy(&h0, p, 2);
      if (two) std::memcpy(&h1, p + bytes, 2);
      sw[r] = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(h1)), _mm_set1_epi16(static_cast<short>(h0))));
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i xv = two ? _mm512_loadu_si512(x[c].qs + b * 32)
                             : _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[c].qs + b * 32)));
      const __m512 sx = _mm512_insertf32x8(_mm512_set1_ps(x[c].d[b]), _mm256_set1_ps(two ? x[c].d[b + 1] : 0.0f), 1);
      __m512i start = _mm512_setzero_si512();
      if constexpr (Format::offset != 0) {
        const int s0 = Format::offset * x[c].sums[b], s1 = two ? Format::offset * x[c].sums[b + 1] : 0;
        start = _mm512_maskz_set1_epi32(1, s0) | _mm512_maskz_set1_epi32(0x100, s1);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i p;
        if constexpr (Format::signed_levels)
          p = _mm512_dpbusd_epi32(start, u[r], _mm512_mask_sub_epi8(xv, neg[r], _mm512_setzero_si512(), xv));
        else
          p = _mm512_dpbusd_epi32(start, u[r], xv);
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw[r], sx), acc[r][c]);
      }
    }
  }
  store_tile(acc, y, ldy);
}

/// pair_tile for one Format, as a tile family.
template <class Format>
struct pair_family {
  template <int R, int C>
  static constexpr tile_fn tile = pair_tile<Format, R, C>;
};

/// q4_K (five = false) and q5_K weights against q8_256 activations, R weight rows x C activation
/// rows. A super-block is four groups of 64 values, each two sub-blocks of 32 in one register:
/// group g holds sub-blocks (0,2), (1,3), (4,6), (5,7); the mins enter as one more product per
/// super-block (8 mins x the activation sums per 32). The products of a super-block are summed in
/// integers: vpmaddubsw makes 16-bit sums of two (at most 2 x 31 x 127, no saturation), and
/// vpdpwssd multiplies each by its sub-block's scale (in both 16-bit halves of a lane) and adds
/// them up, at most 2^22 in a lane; two instructions where a 4-byte dot, a 32-bit multiply and an
/// add took four. The sum is turned to float once, times d. As with pair_tile, each (row, column)
/// pair runs the same operations whatever R and C are.
template <bool five, int R, int C>
void k45_tile(const std::byte* w, std::size_t w_stride, const act_row* x, std::int64_t k, float* y, std::int64_t ldy) {
  constexpr std::size_t bsize = five ? sizeof(block_q5_k) : sizeof(block_q4_k);
  constexpr std::size_t qs_at = five ? 48 : 16;
  __m512 acc[R][C];
  zero_tile(acc);
  const __m512i low4 = _mm512_set1_epi8(0xF);
  const __m512i sixteen = _mm512_set1_epi8(16);
  for (std::int64_t i = 0; i < k / 256; ++i) {
    __m512i scs[R];  // scales of sub-blocks 0..7 in the low 8 lanes
    __m256i mins[R];
    float d[R], ndmin[R];
    __m512i dot[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const std::byte* b = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(i) * bsize;
      std::uint32_t sc[2], mn[2];
      k_scales_mins(b + 4, sc, mn);
      scs[r] = _mm512_castsi256_si512(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(sc[1]), static_cast<int>(sc[0]))));
      scs[r] = _mm512_or_si512(scs[r], _mm512_slli_epi32(scs[r], 16));  // the scale in both 16-bit halves
      mins[r] = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(mn[1]), static_cast<int>(mn[0])));
      d[r] = half(b);
      ndmin[r] = -half(b + 2);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) dot[r][c] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const int ja = 4 * (g / 2) + g % 2;  // the group's sub-blocks: ja and ja + 2
      const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi32(ja), _mm256_set1_epi32(ja + 2), 1);
      __m512i u[R], s[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const std::byte* b = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(i) * bsize;
        const __m512i q = _mm512_loadu_si512(b + qs_at + 64 * (g / 2));
        u[r] = g % 2 ? _mm512_and_si512(_mm512_srli_epi16(q, 4), low4) : _mm512_and_si512(q, low4);
        if constexpr (five) {
          // Sub-block j takes bit j of qh[l] as 16.
          const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << ja)),
                                                  _mm256_set1_epi8(static_cast<char>(1 << (ja + 2))), 1);
          const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
          u[r] = _mm512_mask_add_epi8(u[r], _mm512_test_epi8_mask(qh, bits), u[r], sixteen);
        }
        s[r] = _mm512_permutexvar_epi32(pick, scs[r]);
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


/// k45_tile as a tile family.
template <bool five>
struct k45_family {
  template <int R, int C>
  static constexpr tile_fn tile = k45_tile<five, R, C>;
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

/// One group of 16 repacked q8_0 rows (repack_q8_0_x16) against a tile of C interleaved activation
/// rows (interleave_q8_x8): lane i of every vector is weight row i, so a block takes 8 vpdpbusd
/// per activation row (4 bytes of it broadcast against 4 bytes of each of the 16 weight rows), one
/// conversion and one FMA, and the 16 results are stored as they are. The tile is one stream read
/// at fixed offsets, which leaves the general registers free (with C separate rows the pointers
/// spilled). Each (row, column) runs the same operations whatever C is.
template <int C>
void q8_0_x16_tile(const std::byte* g, std::int64_t nb, const std::byte* xt, float* y, std::int64_t ldy) {
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b, g += k_q8_0_x16_block_bytes, xt += k_interleaved_row_block_bytes * C) {
    const auto* q = reinterpret_cast<const std::int32_t*>(xt);
    const std::int32_t* bias = q + 8 * C;
    const auto* d = reinterpret_cast<const float*>(bias + C);
    __m512i dot[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) dot[c] = _mm512_set1_epi32(bias[c]);
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m512i w = _mm512_loadu_si512(g + 64 * s);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) dot[c] = _mm512_dpbusd_epi32(dot[c], w, _mm512_set1_epi32(q[s * C + c]));
    }
    const __m512 sw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 512)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[c]), _mm512_mul_ps(sw, _mm512_set1_ps(d[c])), acc[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * ldy, acc[c]);
}

void q8_0_x16(const std::byte* w, std::int64_t g0, std::int64_t g1, const std::byte* xt, int nc, std::int64_t k, float* y,
              std::int64_t ldy) {
  using tile = void (*)(const std::byte*, std::int64_t, const std::byte*, float*, std::int64_t);
  static constexpr tile tiles[8] = {q8_0_x16_tile<1>, q8_0_x16_tile<2>, q8_0_x16_tile<3>, q8_0_x16_tile<4>,
                                    q8_0_x16_tile<5>, q8_0_x16_tile<6>, q8_0_x16_tile<7>, q8_0_x16_tile<8>};
  static_assert(k_interleave_rows == 8);
  const std::int64_t nb = k / 32;
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * k_q8_0_x16_block_bytes;
  // A group's weights (16 rows) stay in cache across all the columns.
  for (std::int64_t g = g0; g < g1; ++g) {
    for (int c = 0; c < nc; c += 8) {
      const int cc = std::min(8, nc - c);
      tiles[cc - 1](w + static_cast<std::size_t>(g) * group_bytes, nb, xt + interleaved_q8_x8_bytes(c, k), y + c * ldy + g * 16, ldy);
    }
  }
}

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
  t.row_dot[dtype_slot(dtype::f32)] = dot_f32;
  t.row_dot[dtype_slot(dtype::f16)] = dot_half<load_f16>;
  t.row_dot[dtype_slot(dtype::bf16)] = dot_half<load_bf16>;
  t.row_dot[dtype_slot(dtype::q4_0)] = tile_dot<pair_family<q4_0_pair>>;
  t.row_dot[dtype_slot(dtype::q4_1)] = tile_dot<pair_family<q4_1_pair>>;
  t.row_dot[dtype_slot(dtype::q5_0)] = tile_dot<pair_family<q5_0_pair>>;
  t.row_dot[dtype_slot(dtype::q5_1)] = tile_dot<pair_family<q5_1_pair>>;
  t.row_dot[dtype_slot(dtype::iq4_nl)] = tile_dot<pair_family<iq4_nl_pair>>;
  t.row_dot[dtype_slot(dtype::q8_0)] = tile_dot<pair_family<q8_0_pair>>;
  t.row_dot[dtype_slot(dtype::q4_k)] = tile_dot<k45_family<false>>;
  t.row_dot[dtype_slot(dtype::q5_k)] = tile_dot<k45_family<true>>;
  t.row_dot[dtype_slot(dtype::q6_k)] = tile_dot<q6_k_family>;
  t.row_gemm[dtype_slot(dtype::q4_0)] = tile_gemm<pair_family<q4_0_pair>>;
  t.row_gemm[dtype_slot(dtype::q4_1)] = tile_gemm<pair_family<q4_1_pair>>;
  t.row_gemm[dtype_slot(dtype::q5_0)] = tile_gemm<pair_family<q5_0_pair>>;
  t.row_gemm[dtype_slot(dtype::q5_1)] = tile_gemm<pair_family<q5_1_pair>>;
  t.row_gemm[dtype_slot(dtype::iq4_nl)] = tile_gemm<pair_family<iq4_nl_pair>>;
  t.row_gemm[dtype_slot(dtype::q8_0)] = tile_gemm<pair_family<q8_0_pair>, false>;
  t.row_gemm[dtype_slot(dtype::q4_k)] = tile_gemm<k45_family<false>>;
  t.row_gemm[dtype_slot(dtype::q5_k)] = tile_gemm<k45_family<true>>;
  t.row_gemm[dtype_slot(dtype::q6_k)] = tile_gemm<q6_k_family>;
  t.gemm_f32 = gemm_f32;
  t.q8_0_x16 = q8_0_x16;
}

}  // namespace strata::kernels::avx512
