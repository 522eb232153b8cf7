#pragma once
// The AVX-512 kernels of the 16-row packed layouts (kernels/packed_x16.hpp): one template,
// x16_tile, over a small struct per layout that unpacks a group block's 8 slices of levels.
// Included only by kernels_avx512.cpp inside its #pragma GCC target (after <immintrin.h> and the
// kernels headers); everything here has internal linkage.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels::avx512 {
namespace {

/// The 16 rows' f16 scales at p.
[[gnu::always_inline]] inline __m512 f16_scales(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

/// The 16 rows' e8m0 bytes at p as 2^(e - 128), e8m0_to_fp32_half's values (e < 2: denormals).
[[gnu::always_inline]] inline __m512 e8m0_half_scales(const std::byte* p) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, tiny));
}

/// q8_0: the 8 slices are stored as they are used (levels + 128); the kernel starts each block's
/// sum at -128 * (the activation block's sum), which interleave_q8_x8 stores as the bias.
struct x16_q8_0 {
  static constexpr act_format act = act_format::q8_32;
  static constexpr int values = 32;
  static constexpr std::size_t block_bytes = 16 * 34, scales_at = 512;
  static constexpr int bias_shift = 0;
  static constexpr bool has_mins = false;
  static void levels(const std::byte* g, __m512i (&u)[8]) {
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) u[s] = _mm512_loadu_si512(g + 64 * s);
  }
  static __m512 scales(const std::byte* g) { return f16_scales(g + scales_at); }
};

/// The 4-bit layouts: slice j is the low nibbles of vector j, slice j + 4 its high nibbles; with
/// `fifth`, mask s adds 16 to slice s's levels (q5_0, q5_1); with a Table, the nibbles index its
/// 16 int8 levels (Table::values), + 128 to make them unsigned (iq4_nl, mxfp4). The constant offset of
/// the levels comes off as offset * (the activation block's sum): the bias (-128 times it) shifted
/// right by bias_shift (-1: no offset, the f16 mins m after the scales instead). gguf_bytes: the
/// type's block; e8m0: the scales are e8m0 bytes (mxfp4), else f16.
template <std::size_t gguf_bytes, int shift, bool mins, bool fifth, class Table = void, bool e8m0 = false>
struct x16_nibbles {
  static constexpr act_format act = act_format::q8_32;
  static constexpr int values = 32;
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
    apply_table(u);
  }
  static __m512 scales(const std::byte* g) {
    if constexpr (e8m0) return e8m0_half_scales(g + scales_at);
    else return f16_scales(g + scales_at);
  }
  static void apply_table([[maybe_unused]] __m512i (&u)[8]) {
    if constexpr (!std::is_void_v<Table>) {
      // Adding 128 to an int8 level flips its top bit.
      const __m512i t = _mm512_broadcast_i32x4(
          _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Table::values)), _mm_set1_epi8(static_cast<char>(0x80))));
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) u[s] = _mm512_shuffle_epi8(t, u[s]);
    }
  }
};

using x16_q4_0 = x16_nibbles<18, 4, false, false>;    // -8 * sum
using x16_q4_1 = x16_nibbles<20, -1, true, false>;
using x16_q5_0 = x16_nibbles<22, 3, false, true>;     // -16 * sum
using x16_q5_1 = x16_nibbles<24, -1, true, true>;
/// iq4_nl's levels, for x16_nibbles.
struct iq4_nl_table {
  static constexpr const std::int8_t* values = k_iq4_nl_values;
};
using x16_iq4_nl = x16_nibbles<18, 0, false, false, iq4_nl_table>;  // -128 * sum
/// mxfp4's levels (the doubled e2m1 values; the scales are halved to match).
struct mxfp4_table {
  static constexpr const std::int8_t* values = k_mxfp4_values;
};
using x16_mxfp4 = x16_nibbles<17, 0, false, false, mxfp4_table, true>;  // -128 * sum

/// Decode's tiles (one or two columns) wait on their weights: a block's bytes are asked for into
/// L2 k_prefetch_bytes before the kernel reaches them, and from there into L1
/// k_prefetch_near_bytes before (a group's blocks, then the next group's, and in a model the next
/// matrix's, lie one after the other). A prefetch into L1 holds one of the core's few fill buffers
/// until its line comes from memory; one into L2 frees it sooner, so more lines are on their way
/// at once. One thread, weights from memory (512 MB of copies of a decode matrix), passes of the
/// variants alternating on a shared machine, median ratios: into L1 4 KiB ahead (the previous
/// scheme) -> into L2 4 KiB ahead 1.08-1.10x for q4_1, q5_0, q4_K, q6_K and q8_0; 8 or 16 KiB
/// ahead +1-2% more, 2 KiB 5-10% less; adding the near L1 prefetch +3-6% (q8_0 the same); one
/// prefetch per 128 bytes (the line pairs) 6-16% less; none at all 0.72-0.89x. Past the end of
/// the weights it only asks for lines nothing reads (a prefetch never faults).
constexpr std::size_t k_prefetch_bytes = 8192, k_prefetch_near_bytes = 1024;
template <std::size_t bytes>
[[gnu::always_inline]] inline void prefetch_ahead(const std::byte* p) {
  // The address as an integer: a pointer past the end of the weights would not be a valid one.
  const std::uintptr_t far = reinterpret_cast<std::uintptr_t>(p) + k_prefetch_bytes;
  const std::uintptr_t near = reinterpret_cast<std::uintptr_t>(p) + k_prefetch_near_bytes;
#pragma GCC unroll 64
  for (std::size_t l = 0; l < bytes; l += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(far + l), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(near + l), _MM_HINT_T0);
  }
}

/// acc += vpdpbusd(u, the int32 at p in every lane), with the broadcast folded into the
/// instruction's memory operand (GCC emits a separate vpbroadcastd for _mm512_set1_epi32 of a load).
[[gnu::always_inline]] inline void dpbusd_bcast(__m512i& acc, __m512i u, const std::int32_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*p));
}

/// acc += vpdpwssd(u, the int32 at p in every lane): two int16 products per lane, as dpbusd_bcast.
[[gnu::always_inline]] inline void dpwssd_bcast(__m512i& acc, __m512i u, const std::int32_t* p) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*p));
}

/// One block of a group of 16 packed rows (its levels u, f32 scales sw and mins mw) against one
/// tile of C interleaved activation rows (xt at the block): 8 vpdpbusd per activation row (4 bytes
/// of it broadcast against 4 bytes of each of the 16 weight rows), one conversion and one FMA
/// (two with mins) into acc. The integer sum of a block is exact whatever the order of its
/// products (small tiles split it in two chains, which decode's one column would otherwise wait
/// on), and each (row, column) runs the same float operations whatever C is.
template <class F, int C>
[[gnu::always_inline]] inline void x16_block(const __m512i (&u)[8], __m512 sw, [[maybe_unused]] __m512 mw, const std::byte* xt,
                                             __m512* acc) {
  constexpr int chains = C <= 2 ? 2 : 1;
  const auto* q = reinterpret_cast<const std::int32_t*>(xt);
  const std::int32_t* bias = q + 8 * C;
  const auto* d = reinterpret_cast<const float*>(bias + C);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    __m512i dot[chains];
    dot[0] = F::bias_shift >= 0 ? _mm512_set1_epi32(bias[c] >> std::max(F::bias_shift, 0)) : _mm512_setzero_si512();
    if constexpr (chains == 2) dot[1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) dpbusd_bcast(dot[s % chains], u[s], q + s * C + c);
    if constexpr (chains == 2) dot[0] = _mm512_add_epi32(dot[0], dot[1]);
    acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[0]), _mm512_mul_ps(sw, _mm512_set1_ps(d[c])), acc[c]);
    if constexpr (F::has_mins) {
      // m times d_x * (the activation block's sum): the bias is -128 times that sum, exactly.
      acc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(d[c] * (static_cast<float>(bias[c]) * -0.0078125f)), acc[c]);
    }
  }
}

/// One group of 16 packed rows against T consecutive tiles of C interleaved activation rows
/// (interleave_q8_x8; tile t at xt + t * tile_bytes): lane i of every vector is weight row i, and
/// the 16 results of each row are stored as they are. A block's levels are unpacked once for all
/// T tiles (a prefill takes two tiles of 8 at once: the unpacking is then half as much per row),
/// and each (row, column) gets the same operations as in a tile of its own (x16_block), so a row
/// gets the same bits alone or in a batch.
template <class F, int C, int T = 1>
void x16_tile(const std::byte* g, std::int64_t nb, const std::byte* xt, float* y, std::int64_t ldy, std::size_t tile_bytes = 0) {
  __m512 acc[T][C];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) acc[t][c] = _mm512_setzero_ps();
  constexpr std::size_t block_step = interleaved_row_block_bytes(act_format::q8_32) * C;
  for (std::int64_t b = 0; b < nb; ++b, g += F::block_bytes, xt += block_step) {
    if constexpr (C <= 2) prefetch_ahead<F::block_bytes>(g);
    __m512i u[8];
    F::levels(g, u);
    const __m512 sw = F::scales(g);
    __m512 mw = sw;
    if constexpr (F::has_mins) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + F::scales_at + 32)));
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) x16_block<F, C>(u, sw, mw, xt + t * tile_bytes, acc[t]);
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + (t * C + c) * ldy, acc[t][c]);
}

/// q4_K, 16 rows x C activation rows per super-block (k_x16_tile): sub-block s (32 values, qs
/// vectors 8 (s / 2) .. + 7, low nibbles for even s, high for odd) takes 8 vpdpbusd into an exact
/// int32 dot per row, times its 6-bit scale (vpmulld) into the super-block's integer sum; the mins
/// go in first as an integer sum of their own (each 6-bit min times the activation sum of its 32
/// values, two sub-blocks per vpdpwssd), times dmin * d_x.
struct x16_q4_k {
  static constexpr act_format act = act_format::q8_256;
  static constexpr int values = 256;
  static constexpr std::size_t block_bytes = 16 * 144, d_at = 2240;
  template <int C>
  static void superblock(const std::byte* g, const std::int32_t* q, const std::int32_t* sums, const float* d, __m512 (&acc)[C],
                         __m512i (&is)[C]) {
    const __m512i low4 = _mm512_set1_epi8(0xF), byte = _mm512_set1_epi32(0xFF);
    // The 6-bit scales and mins of sub-blocks 0..3 and 4..7, a byte each (k_scales_mins, 16 rows).
    const __m512i u0 = _mm512_loadu_si512(g + 2048), u1 = _mm512_loadu_si512(g + 2112), u2 = _mm512_loadu_si512(g + 2176);
    const __m512i six = _mm512_set1_epi32(0x3F3F3F3F), four = _mm512_set1_epi32(0x0F0F0F0F), top = _mm512_set1_epi32(0x30303030);
    const __m512i sc[2] = {_mm512_and_si512(u0, six),
                           _mm512_or_si512(_mm512_and_si512(u2, four), _mm512_and_si512(_mm512_srli_epi32(u0, 2), top))};
    const __m512i mn[2] = {_mm512_and_si512(u1, six), _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), four),
                                                                       _mm512_and_si512(_mm512_srli_epi32(u1, 2), top))};
    // Sub-blocks s and s + 2 of each four share a vpdpwssd: their mins as the two int16 halves of
    // a lane (bytes 0 and 2, or 1 and 3, of mn), against a word of their two activation sums
    // (|sum| <= 32 * 127 fits 16 bits), made once per column and read as a broadcast operand.
    // The integer sum is the same as with one product per sub-block; it takes 4 vpdpwssd per
    // column instead of 8, and no scalar-to-vector broadcasts.
    const __m512i halves = _mm512_set1_epi32(0x00FF00FF);
    const __m512i mp[4] = {_mm512_and_si512(mn[0], halves), _mm512_and_si512(_mm512_srli_epi32(mn[0], 8), halves),
                           _mm512_and_si512(mn[1], halves), _mm512_and_si512(_mm512_srli_epi32(mn[1], 8), halves)};
    alignas(64) std::int32_t words[4 * C];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const int a = 4 * (p / 2) + p % 2;  // with a + 2
      if constexpr (C == 8) {
        // A full tile's eight columns at once (GCC leaves the loop below scalar).
        auto at = [&](int row) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + row * C)); };
        const __m256i lo = _mm256_add_epi32(at(2 * a), at(2 * a + 1)), hi = _mm256_add_epi32(at(2 * a + 4), at(2 * a + 5));
        _mm256_store_si256(reinterpret_cast<__m256i*>(words + p * C),
                           _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(hi, 16)));
        continue;
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const std::int32_t lo = sums[2 * a * C + c] + sums[(2 * a + 1) * C + c];
        const std::int32_t hi = sums[(2 * a + 4) * C + c] + sums[(2 * a + 5) * C + c];
        words[p * C + c] = static_cast<std::int32_t>((static_cast<std::uint32_t>(lo) & 0xFFFFu) | (static_cast<std::uint32_t>(hi) << 16));
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) dpwssd_bcast(is[c], mp[p], words + p * C + c);
    const __m512 dminw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 2272)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(is[c]), _mm512_mul_ps(dminw, _mm512_set1_ps(d[c])), acc[c]);
      is[c] = _mm512_setzero_si512();
    }
    // The high nibbles stay in place (16 times their levels, still below 256), and the low
    // nibbles' dots take 16 times their scale to match: the integer sum is 16 times the exact
    // one, shifted back at the end. Vector shifts share their port with vpdpbusd; this takes one
    // per sub-block pair and one per column instead of 8 per pair. At most 16 * 8 sub-blocks *
    // 63 * 32 * 15 * 128 < 2^31.
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m512i scale = s % 2 ? _mm512_and_si512(_mm512_srli_epi32(sc[s / 4], 8 * (s % 4)), byte)
                                  : _mm512_and_si512(s % 4 ? _mm512_srli_epi32(sc[s / 4], 8 * (s % 4) - 4) : _mm512_slli_epi32(sc[s / 4], 4),
                                                     _mm512_set1_epi32(0xFF0));
      const __m512i mask = s % 2 ? _mm512_set1_epi8(static_cast<char>(0xF0)) : low4;
      __m512i u[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) u[j] = _mm512_and_si512(_mm512_loadu_si512(g + 64 * (8 * (s / 2) + j)), mask);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        // Decode's one or two columns sum in two chains, so as not to wait on one chain of 8
        // (the integer sum is the same whatever the order).
        constexpr int chains = C <= 2 ? 2 : 1;
        __m512i dot[chains];
#pragma GCC unroll 2
        for (int h = 0; h < chains; ++h) dot[h] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) dpbusd_bcast(dot[j % chains], u[j], q + (8 * s + j) * C + c);
        if constexpr (chains == 2) dot[0] = _mm512_add_epi32(dot[0], dot[1]);
        is[c] = _mm512_add_epi32(is[c], _mm512_mullo_epi32(dot[0], scale));
        // Keeps the product here: left free, GCC puts every sub-block's dots on the stack and
        // multiplies them all at the end of the super-block (64 spills and reloads at 8 columns).
        asm("" : "+v"(is[c]));
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) is[c] = _mm512_srai_epi32(is[c], 4);
  }
};

/// q6_K, 16 rows x C activation rows per super-block (k_x16_tile). Quarter qd (0..3) of half h is
/// the 32 values from 128 h + 32 qd: the low (qd < 2) or high nibbles of ql vectors
/// 16 h + 8 (qd % 2) + j, with bits 2 qd, 2 qd + 1 of qh vectors 8 h + j as bits 4 and 5. Each 16
/// values (one int8 scale) take 4 vpdpbusd into an int32 dot that goes into the super-block's
/// integer sum times the scale (vpmulld); the levels' offset, -32 * (their activation sum) times
/// the scale, goes in first.
struct x16_q6_k {
  static constexpr act_format act = act_format::q8_256;
  static constexpr int values = 256;
  static constexpr std::size_t block_bytes = 16 * 210, d_at = 3328;
  template <int C>
  static void superblock(const std::byte* g, const std::int32_t* q, const std::int32_t* sums, const float*, __m512 (&)[C],
                         __m512i (&is)[C]) {
    const __m512i low4 = _mm512_set1_epi8(0xF), bits45 = _mm512_set1_epi8(0x30);
    // The levels' offset first: -32 * scale * (activation sum) over the 16 scales, two per
    // vpdpwssd (the int8 scales of 16-value blocks sb and sb + 2 as int16 halves times -32, against
    // a word of their two sums, each |sum| <= 16 * 127): 8 per column instead of a scalar product
    // and a broadcast per 16 values. The integer sum is the same.
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i sc = _mm512_loadu_si512(g + 3072 + 64 * v);
      // Bytes 0 and 2, then 1 and 3, of each lane, sign-extended to 16 bits, times -32.
      const __m512i pair[2] = {_mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(_mm512_srai_epi16(_mm512_slli_epi16(sc, 8), 8), 5)),
                               _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(_mm512_srai_epi16(sc, 8), 5))};
      alignas(64) std::int32_t words[2 * C];
#pragma GCC unroll 2
      for (int o = 0; o < 2; ++o)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          words[o * C + c] = static_cast<std::int32_t>((static_cast<std::uint32_t>(sums[(4 * v + o) * C + c]) & 0xFFFFu) |
                                                       (static_cast<std::uint32_t>(sums[(4 * v + o + 2) * C + c]) << 16));
#pragma GCC unroll 2
      for (int o = 0; o < 2; ++o)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) dpwssd_bcast(is[c], pair[o], words + o * C + c);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int qd = 0; qd < 4; ++qd) {
#pragma GCC unroll 2
        for (int t = 0; t < 2; ++t) {
          const int sb = 8 * h + 2 * qd + t;  // the 16 values' scale
          const __m512i scale = _mm512_srai_epi32(_mm512_slli_epi32(_mm512_loadu_si512(g + 3072 + 64 * (sb / 4)), 24 - 8 * (sb % 4)), 24);
          __m512i u[4];
#pragma GCC unroll 4
          for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * t + jj;
            const __m512i l = _mm512_loadu_si512(g + 64 * (16 * h + 8 * (qd % 2) + j));
            const __m512i hb = _mm512_loadu_si512(g + 2048 + 64 * (8 * h + j));
            // Bits 2 qd, 2 qd + 1 moved to bits 4 and 5 by one shift (none for qd = 2: vector
            // shifts share their port with vpdpbusd), then merged with the nibble by a bit select.
            const __m512i hs = qd == 0 ? _mm512_slli_epi16(hb, 4) : qd == 1 ? _mm512_slli_epi16(hb, 2) : qd == 2 ? hb : _mm512_srli_epi16(hb, 2);
            u[jj] = _mm512_ternarylogic_epi32(low4, qd < 2 ? l : _mm512_srli_epi16(l, 4), _mm512_and_si512(hs, bits45), 0xCA);
          }
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            __m512i dot = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int jj = 0; jj < 4; ++jj)
              dpbusd_bcast(dot, u[jj], q + (32 * h + 8 * qd + 4 * t + jj) * C + c);
            is[c] = _mm512_add_epi32(is[c], _mm512_mullo_epi32(dot, scale));
            asm("" : "+v"(is[c]));  // the product here, not deferred through the stack (x16_q4_k)
          }
        }
      }
    }
  }
};

/// A K-quant layout's tile: per super-block, F::superblock sums each column's products into an
/// int32 per row (exact, and in a fixed order) and adds any float terms of its own to acc; the
/// sum goes in once, times d * d_x (the f16 d of the 16 rows at d_at). The interleaved activations
/// hold each super-block's 64 words of levels, 16 sums and scale per row (interleave_q8_x8).
template <class F, int C>
void k_x16_tile(const std::byte* g, std::int64_t nb, const std::byte* xt, float* y, std::int64_t ldy) {
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b, g += F::block_bytes, xt += interleaved_row_block_bytes(F::act) * C) {
    if constexpr (C <= 2) prefetch_ahead<F::block_bytes>(g);
    const auto* q = reinterpret_cast<const std::int32_t*>(xt);
    const std::int32_t* sums = q + 64 * C;
    const auto* d = reinterpret_cast<const float*>(sums + 16 * C);
    __m512i is[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) is[c] = _mm512_setzero_si512();
    F::template superblock<C>(g, q, sums, d, acc, is);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + F::d_at)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[c]), _mm512_mul_ps(dw, _mm512_set1_ps(d[c])), acc[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(y + c * ldy, acc[c]);
}

/// The tile of a layout: its own where it has one (the K-quants), else x16_tile.
template <class F, int C>
void x16_any_tile(const std::byte* g, std::int64_t nb, const std::byte* xt, float* y, std::int64_t ldy) {
  if constexpr (F::act == act_format::q8_256) k_x16_tile<F, C>(g, nb, xt, y, ldy);
  else x16_tile<F, C>(g, nb, xt, y, ldy);
}

/// The packed_gemm of one layout: groups [g0, g1) against nc interleaved rows, in runs of 64
/// activation rows (their tiles stay in cache while every group of the range passes them), each
/// group's weights against the run's tiles of 8 rows.
///
/// Tried on a Sapphire Rapids: AMX int8 tiles for the 32-value layouts (one tile product of 16
/// activation rows x 16 weight rows per block, then x16_block's float steps from the stored int32
/// tile, which gives the same bits). The per-block tile zero, store and float steps bound it:
/// 1.2-1.35x on this gemm at m = 512 (q5_0, q8_0; 1.05x q4_1), and no prefill gain measurable on
/// Gemma 3 270M (0.96-1.02x), so these tiles stayed.
template <class F>
void x16_gemm(const std::byte* w, std::int64_t g0, std::int64_t g1, const std::byte* xt, int nc, std::int64_t k, float* y,
              std::int64_t ldy) {
  using tile = void (*)(const std::byte*, std::int64_t, const std::byte*, float*, std::int64_t);
  static constexpr tile tiles[8] = {x16_any_tile<F, 1>, x16_any_tile<F, 2>, x16_any_tile<F, 3>, x16_any_tile<F, 4>,
                                    x16_any_tile<F, 5>, x16_any_tile<F, 6>, x16_any_tile<F, 7>, x16_any_tile<F, 8>};
  static_assert(k_interleave_rows == 8);
  constexpr int run = 64;
  const std::int64_t nb = k / F::values;
  const std::size_t group_bytes = static_cast<std::size_t>(nb) * F::block_bytes;
  for (int c0 = 0; c0 < nc; c0 += run) {
    const int c1 = std::min(nc, c0 + run);
    for (std::int64_t g = g0; g < g1; ++g) {
      const std::byte* wg = w + static_cast<std::size_t>(g) * group_bytes;
      int c = c0;
      if constexpr (F::act == act_format::q8_32) {
        // Two full tiles at a time where there are (see x16_tile).
        const std::size_t tile_bytes = interleaved_q8_x8_bytes(F::act, 8, k);
        for (; c + 16 <= c1; c += 16) x16_tile<F, 8, 2>(wg, nb, xt + interleaved_q8_x8_bytes(F::act, c, k), y + c * ldy + g * 16, ldy, tile_bytes);
      }
      for (; c < c1; c += 8) {
        const int cc = std::min(8, c1 - c);
        tiles[cc - 1](wg, nb, xt + interleaved_q8_x8_bytes(F::act, c, k), y + c * ldy + g * 16, ldy);
      }
    }
  }
}

}  // namespace
}  // namespace strata::kernels::avx512
