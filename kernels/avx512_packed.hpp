#pragma once
// The AVX-512 kernels of the 16-row packed layouts (kernels/packed_x16.hpp): one template,
// x16_tile, over a small struct per layout that unpacks a group block's 8 slices of levels.
// Included only by kernels_avx512.cpp inside its #pragma GCC target (after <immintrin.h> and the
// kernels headers); everything here has internal linkage.

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels::avx512 {
namespace {

/// q8_0: the 8 slices are stored as they are used (levels + 128); the kernel starts each block's
/// sum at -128 * (the activation block's sum), which interleave_q8_x8 stores as the bias.
struct x16_q8_0 {
  static constexpr std::size_t block_bytes = 16 * 34, scales_at = 512;
  static constexpr int bias_shift = 0;
  static constexpr bool has_mins = false;
  static void levels(const std::byte* g, __m512i (&u)[8]) {
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) u[s] = _mm512_loadu_si512(g + 64 * s);
  }
};

/// The 4-bit layouts: slice j is the low nibbles of vector j, slice j + 4 its high nibbles; with
/// `fifth`, mask s adds 16 to slice s's levels (q5_0, q5_1); with a `table`, the nibbles index its
/// 16 int8 levels, + 128 to make them unsigned (iq4_nl). The constant offset of the levels comes
/// off as offset * (the activation block's sum): the bias (-128 times it) shifted right by
/// bias_shift (-1: no offset, the f16 mins m after the scales instead). gguf_bytes: the type's
/// block.
template <std::size_t gguf_bytes, int shift, bool mins, bool fifth, const std::int8_t* table = nullptr>
struct x16_nibbles {
  static constexpr std::size_t block_bytes = 16 * gguf_bytes, scales_at = fifth ? 320 : 256;
  static constexpr int bias_shift = shift;
  static constexpr bool has_mins = mins;
  static void levels(const std::byte* g, __m512i (&u)[8]) {
    const __m512i low4 = _mm512_set1_epi8(0xF);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(g + 64 * j);
      u[j] = _mm512_and_si512(v, low4);
      u[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    if constexpr (fifth) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        std::uint64_t bits;
        std::memcpy(&bits, g + 256 + 8 * s, 8);
        u[s] = _mm512_mask_add_epi8(u[s], _cvtu64_mask64(bits), u[s], _mm512_set1_epi8(16));
      }
    }
    if constexpr (table != nullptr) {
      // Adding 128 to an int8 level flips its top bit.
      const __m512i t = _mm512_broadcast_i32x4(
          _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)), _mm_set1_epi8(static_cast<char>(0x80))));
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) u[s] = _mm512_shuffle_epi8(t, u[s]);
    }
  }
};

using x16_q4_0 = x16_nibbles<18, 4, false, false>;    // -8 * sum
using x16_q4_1 = x16_nibbles<20, -1, true, false>;
using x16_q5_0 = x16_nibbles<22, 3, false, true>;     // -16 * sum
using x16_q5_1 = x16_nibbles<24, -1, true, true>;
using x16_iq4_nl = x16_nibbles<18, 0, false, false, k_iq4_nl_values>;  // -128 * sum

/// One group of 16 packed rows against a tile of C interleaved activation rows (interleave_q8_x8):
/// lane i of every vector is weight row i, so a block takes 8 vpdpbusd per activation row (4 bytes
/// of it broadcast against 4 bytes of each of the 16 weight rows), one conversion and one FMA
/// (two with mins), and the 16 results are stored as they are. The integer sum of a block is exact
/// whatever the order of its products (small tiles split it in two chains, which decode's one
/// column would otherwise wait on), and each (row, column) runs the same float operations
/// whatever C is, so a row gets the same bits alone or in a batch.
template <class F, int C>
void x16_tile(const std::byte* g, std::int64_t nb, const std::byte* xt, float* y, std::int64_t ldy) {
  constexpr int chains = C <= 2 ? 2 : 1;
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b, g += F::block_bytes, xt += k_interleaved_row_block_bytes * C) {
    const auto* q = reinterpret_cast<const std::int32_t*>(xt);
    const std::int32_t* bias = q + 8 * C;
    const auto* d = reinterpret_cast<const float*>(bias + C);
    __m512i u[8];
    F::levels(g, u);
    const __m512 sw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + F::scales_at)));
    [[maybe_unused]] __m512 mw;
    if constexpr (F::has_mins) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + F::scales_at + 32)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      __m512i dot[chains];
      dot[0] = F::bias_shift >= 0 ? _mm512_set1_epi32(bias[c] >> std::max(F::bias_shift, 0)) : _mm512_setzero_si512();
      if constexpr (chains == 2) dot[1] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) dot[s % chains] = _mm512_dpbusd_epi32(dot[s % chains], u[s], _mm512_set1_epi32(q[s * C + c]));
      if constexpr (chains == 2) dot[0] = _mm512_add_epi32(dot[0], dot[1]);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[0]), _mm512_mul_ps(sw, _mm512_set1_ps(d[c])), acc[c]);
      if constexpr (F::has_mins) {
        // m times d_x * (the activation block's sum): the bias is -128 times that sum, exactly.
        acc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[c] * (static_cast<float>(bias[c]) * -0.0078125f)), acc[c]);
      }
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * ldy, acc[c]);
}

/// The packed_gemm of one layout: groups [g0, g1) against nc interleaved rows, in runs of 64
/// activation rows (their tiles stay in cache while every group of the range passes them), each
/// group's weights against the run's tiles of 8 rows.
template <class F>
void x16_gemm(const std::byte* w, std::int64_t g0, std::int64_t g1, const std::byte* xt, int nc, std::int64_t k, float* y,
              std::int64_t ldy) {
  using tile = void (*)(const std::byte*, std::int64_t, const std::byte*, float*, std::int64_t);
  static constexpr tile tiles[8] = {x16_tile<F, 1>, x16_tile<F, 2>, x16_tile<F, 3>, x16_tile<F, 4>,
                                    x16_tile<F, 5>, x16_tile<F, 6>, x16_tile<F, 7>, x16_tile<F, 8>};
  static_assert(k_interleave_rows == 8);
  constexpr int run = 64;
  const std::int64_t nb = k / 32;
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * F::block_bytes;
  for (int c0 = 0; c0 < nc; c0 += run) {
    const int c1 = std::min(nc, c0 + run);
    for (std::int64_t g = g0; g < g1; ++g) {
      for (int c = c0; c < c1; c += 8) {
        const int cc = std::min(8, c1 - c);
        tiles[cc - 1](w + static_cast<std::size_t>(g) * group_bytes, nb, xt + interleaved_q8_x8_bytes(c, k), y + c * ldy + g * 16, ldy);
      }
    }
  }
}

}  // namespace
}  // namespace strata::kernels::avx512
