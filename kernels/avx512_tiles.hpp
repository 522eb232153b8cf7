#pragma once
// The AVX-512 tile machinery of kernels_avx512.cpp and its tiles for the 32-value block types
// (q8_0, q4_0, iq4_nl, mxfp4, q4_1, q5_0, q5_1): one template, pair_tile, over a small struct per
// block layout. Included only by kernels_avx512.cpp inside its #pragma GCC target (after <immintrin.h>
// and the kernels headers); everything here has internal linkage.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels::avx512 {
namespace {

/// The lanes of a 16-lane step that exist when `left` values remain.
inline __mmask16 tail_mask(std::int64_t left) { return static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1); }

/// One weight row's pair of blocks as pair_tile uses them (decode_pairs): the levels vector and
/// the two blocks' scales in lanes 0..7 and 8..15.
struct decoded_pair {
  __m512i levels;
  __m512 scales;
};
/// Pairs of 32-value blocks in a row of k values (the last may hold one block).
inline std::int64_t pairs_per_row(std::int64_t k) { return (k / 32 + 1) / 2; }

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

/// Whether a tile family has decoded tiles: `decode` writes weight rows, decoded_row_bytes(k)
/// bytes each (64-byte multiples), that its `decoded` tiles read in place of the GGUF rows and give
/// the same bits from.
template <class Family>
constexpr bool decodable = requires { requires Family::decodable; };

/// A decodable tile family as a row GEMM over more than 4 activation rows: each weight row would
/// be decoded again by every tile of 4 activation rows (its nibbles unpacked, looked up, its scales
/// read), so the nr rows are decoded once into a per-thread buffer, and the decoded tiles run
/// four weight rows at a time (their decoded pairs stay in L1) against every 4 activation rows.
template <class Family>
void run_decoded(const void* w, std::size_t w_stride, int nr, const act_row* x, int nc, std::int64_t k, float* y,
                 std::int64_t ldy) {
  static constexpr tile_fn tiles[4][4] = {
      {Family::template decoded<1, 1>, Family::template decoded<1, 2>, Family::template decoded<1, 3>, Family::template decoded<1, 4>},
      {Family::template decoded<2, 1>, Family::template decoded<2, 2>, Family::template decoded<2, 3>, Family::template decoded<2, 4>},
      {Family::template decoded<3, 1>, Family::template decoded<3, 2>, Family::template decoded<3, 3>, Family::template decoded<3, 4>},
      {Family::template decoded<4, 1>, Family::template decoded<4, 2>, Family::template decoded<4, 3>, Family::template decoded<4, 4>},
  };
  // Bytes, with room to round the start up to 64 (the vectors' alignment).
  thread_local std::vector<std::byte> bytes;
  const std::size_t stride = Family::decoded_row_bytes(k);
  if (bytes.size() < stride * static_cast<std::size_t>(nr) + 64) bytes.resize(stride * static_cast<std::size_t>(nr) + 64);
  std::byte* buf = bytes.data() + (64 - reinterpret_cast<std::uintptr_t>(bytes.data()) % 64) % 64;
  Family::decode(static_cast<const std::byte*>(w), w_stride, nr, k, buf);
  for (int r = 0; r < nr; r += 4) {
    const int rr = std::min(4, nr - r);
    run_tiles(tiles, rr, buf + static_cast<std::size_t>(r) * stride, stride, rr, x, nc, k, y + r, ldy);
  }
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
  if constexpr (decodable<Family>) {
    if (nc > 4) {
      run_decoded<Family>(w, w_stride, nr, x, nc, k, y, ldy);
      return;
    }
  }
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

/// Blocks of a scale and 16 quant bytes (the last 16 of the block) whose nibbles index 16 int8
/// levels (iq4_nl, mxfp4): vpshufb looks the nibbles up in values + 128 (held in each 128-bit
/// lane), unsigned levels for vpdpbusd (at most 255 x 127 x 4 per lane: its 32-bit sums cannot
/// saturate), and the + 128 comes back off as -128 * (sum of the activation block).
template <const std::int8_t* values, std::size_t block_bytes>
struct table4_pair {
  static constexpr std::size_t bytes = block_bytes;
  static constexpr int offset = -128;
  static constexpr bool signed_levels = false, has_mins = false;
  static __m512i levels(const std::byte* p, bool two) {
    // Adding 128 to an int8 level flips its top bit.
    const __m512i table = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)),
                                                               _mm_set1_epi8(static_cast<char>(0x80))));
    return _mm512_shuffle_epi8(table, nibble_pair(p + bytes - 16, bytes, two));
  }
};

/// iq4_nl: an f16 scale and the nibbles of k_iq4_nl_values.
using iq4_nl_pair = table4_pair<k_iq4_nl_values, 18>;

/// mxfp4: an e8m0 scale byte (e8m0_scale: halved, as k_mxfp4_values are the doubled e2m1
/// levels) and the nibbles of k_mxfp4_values.
struct mxfp4_pair : table4_pair<k_mxfp4_values, 17> {
  static constexpr bool e8m0_scale = true;
};

/// The scales of the blocks at p and p + bytes (0 where !two), in lanes 0..7 and 8..15: an f16 d
/// first in the block, or an e8m0 byte for formats that say e8m0_scale.
template <class Format>
[[gnu::always_inline]] inline __m512 pair_scales(const std::byte* p, bool two) {
  if constexpr (requires { Format::e8m0_scale; }) {
    const float s0 = e8m0_to_fp32_half(static_cast<std::uint8_t>(p[0]));
    const float s1 = two ? e8m0_to_fp32_half(static_cast<std::uint8_t>(p[Format::bytes])) : 0.0f;
    return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
  } else {
    std::uint16_t h0, h1 = 0;
    std::memcpy(&h0, p, 2);
    if (two) std::memcpy(&h1, p + Format::bytes, 2);
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(h1)), _mm_set1_epi16(static_cast<short>(h0))));
  }
}

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

/// Decodes nr weight rows of k values (Format without signed levels or mins) into out: row r's
/// pairs of blocks at out + r * pairs_per_row(k), what pair_tile computes from the GGUF bytes.
template <class Format>
void decode_pairs(const std::byte* w, std::size_t w_stride, int nr, std::int64_t k, std::byte* bytes) {
  auto* out = reinterpret_cast<decoded_pair*>(bytes);
  const std::int64_t nb = k / 32, np = pairs_per_row(k);
  for (int r = 0; r < nr; ++r) {
    for (std::int64_t j = 0; j < np; ++j) {
      const std::byte* p = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(2 * j) * Format::bytes;
      const bool two = 2 * j + 1 < nb;
      out[r * np + j] = decoded_pair{Format::levels(p, two), pair_scales<Format>(p, two)};
    }
  }
}

/// Weights of 32-value blocks (Format: one of the *_pair structs above, each block a scale first,
/// read by pair_scales) against q8_32 activations, R weight rows x C activation rows, two blocks (64 values)
/// per step. Each (row, column) pair runs the same operations whatever R and C are (vpdpbusd of
/// the levels, one scale per block, one f32 accumulator), so the GEMV (1 x 1) and the GEMM tiles
/// give bit-identical results. Signed levels (q8_0) go in as |w| with x negated where w < 0. A
/// constant offset per level comes in as offset * (sum of the activation block), the starting
/// value in the first lane of each block. Offsets m per block (has_mins) are a product of their
/// own, sum over blocks of m times d_x * (sum of the activation block), taken first with 16 blocks
/// to a vector: one FMA per 16 blocks, where adding each block's m term in the level loop took
/// one per two.
template <class Format, int R, int C, bool Decoded = false>
void pair_tile(const std::byte* w, std::size_t w_stride, const act_row* x, std::int64_t k, float* y, std::int64_t ldy) {
  constexpr std::size_t bytes = Format::bytes;
  static_assert(!Decoded || (!Format::signed_levels && !Format::has_mins), "decode_pairs keeps levels and scales only");
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
      if constexpr (Decoded) {
        const auto* d = reinterpret_cast<const decoded_pair*>(w + static_cast<std::size_t>(r) * w_stride) + b / 2;
        u[r] = d->levels;
        sw[r] = d->scales;
        continue;
      }
      const std::byte* p = w + static_cast<std::size_t>(r) * w_stride + static_cast<std::size_t>(b) * bytes;
      u[r] = Format::levels(p, two);
      if constexpr (Format::signed_levels) {
        neg[r] = _mm512_movepi8_mask(u[r]);
        u[r] = _mm512_abs_epi8(u[r]);
      }
      sw[r] = pair_scales<Format>(p, two);
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

/// pair_tile for one Format, as a tile family. Formats without signed levels or mins can also be
/// decoded once (decode_pairs) and then run through the `decoded` tiles, which read the decoded
/// rows: the same operations on the same values for every output, so the same bits.
template <class Format>
struct pair_family {
  template <int R, int C>
  static constexpr tile_fn tile = pair_tile<Format, R, C>;
  static constexpr bool decodable = !Format::signed_levels && !Format::has_mins;
  template <int R, int C>
  static constexpr tile_fn decoded = pair_tile<Format, R, C, true>;
  static std::size_t decoded_row_bytes(std::int64_t k) { return static_cast<std::size_t>(pairs_per_row(k)) * sizeof(decoded_pair); }
  static void decode(const std::byte* w, std::size_t w_stride, int nr, std::int64_t k, std::byte* out) {
    decode_pairs<Format>(w, w_stride, nr, k, out);
  }
};

}  // namespace
}  // namespace strata::kernels::avx512
