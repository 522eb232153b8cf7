#pragma once
// Weight matrices of 32-value block types with their rows interleaved 16 at a time, for kernels
// that compute 16 weight rows in the 16 lanes of one vector (kernel_table::packed_gemm): a 4-byte
// slice of one activation row is broadcast against the same slice of 16 weight rows, so a block
// takes 8 vpdpbusd, one conversion and one FMA per activation row for all 16 outputs, and the
// results are stored as they are, with no horizontal sums.
//
// A packed matrix of `rows` rows holds rows / 16 groups, then the rows % 16 left over in the GGUF
// layout at their own offsets; it takes exactly the bytes of the GGUF matrix. A group is block
// after block of 32 values; block b of a group, for its 16 rows i = 0..15:
//
//   q8_0:   | slice s = 0..7: levels 4s..4s+3 of row 0, of row 1, ..., of row 15, each + 128 | d[16] (f16) |
//   q4_0, iq4_nl:  | vector j = 0..3: bytes 4j..4j+3 of row i's qs, rows in order | d[16] |
//   q4_1:   | the q4_0 vectors | d[16] | m[16] (f16) |
//   q5_0:   | the q4_0 vectors | fifth bits: u64 mask s = 0..7, bit 4i + t = bit 4s + t of row i's qh | d[16] |
//   q5_1:   | the q4_0 vectors | the q5_0 masks | d[16] | m[16] |
//
// In the 4-bit layouts vector j's low nibbles are levels 4j..4j+3 of each row (slice j) and its
// high nibbles levels 16 + 4j.. (slice j + 4): the GGUF nibble order, so packing copies 4 bytes
// at a time. q8_0's levels are stored as w + 128 (unsigned, the operand vpdpbusd multiplies
// unsigned), and the kernel takes 128 * (the activation block's sum) back off.
//
// 544, 288, 320, 352 and 384 bytes per group and block: 16 blocks of the GGUF type.

#include <cstddef>
#include <cstdint>

#include "kernels/types.hpp"

namespace strata::kernels {

/// Whether type t has a 16-row packed layout (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl).
bool x16_packable(dtype t);
/// Bytes of one block (32 values) of a 16-row group: 16 GGUF blocks.
std::size_t x16_block_bytes(dtype t);
/// Where a group block's f16 scales d[16] start (its m[16] follow them, for q4_1 and q5_1).
std::size_t x16_scales_at(dtype t);
/// Packs a GGUF matrix of `rows` rows of k values (src) into dst (as many bytes): the groups, then
/// the rows % 16 left over, copied.
void pack_x16(dtype t, const void* src, std::int64_t rows, std::int64_t k, void* dst);
/// Row `row` of a packed matrix of `rows` rows in the GGUF layout (row_bytes(t, k) bytes at dst):
/// the very bytes pack_x16 took.
void unpack_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, void* dst);
/// Row `row` of a packed matrix, dequantized into dst (k values), as dequantize_row gives it.
void dequantize_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, float* dst);

}  // namespace strata::kernels
