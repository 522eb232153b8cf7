#pragma once
// Weight matrices with their rows interleaved 16 at a time, for kernels that compute 16 weight
// rows in the 16 lanes of one vector (kernel_table::packed_gemm): a 4-byte slice of one
// activation row is broadcast against the same slice of 16 weight rows, so 32 values take 8
// vpdpbusd per activation row for all 16 outputs, and the results are stored as they are, with
// no horizontal sums.
//
// A packed matrix of `rows` rows holds rows / 16 groups, then the rows % 16 left over in the GGUF
// layout at their own offsets; it takes exactly the bytes of the GGUF matrix. A group is block
// after block (32 values, or 256 for the K-quants); a block of a group holds the 16 rows' GGUF
// blocks, each field's 4-byte words as vectors (vector w of a field: word w of row 0, of row 1,
// ..., of row 15) and each f16 as 16 of them:
//
//   q8_0:   | levels: 8 vectors, each byte + 128 | d[16] (f16) |
//   q4_0, iq4_nl:  | qs: 4 vectors | d[16] |
//   mxfp4:  | qs: 4 vectors | e[16] (the e8m0 bytes) |
//   q4_1:   | qs | d[16] | m[16] (f16) |
//   q5_0:   | qs | fifth bits: u64 mask s = 0..7, bit 4i + t = bit 4s + t of row i's qh | d[16] |
//   q5_1:   | qs | the q5_0 masks | d[16] | m[16] |
//   q4_K:   | qs: 32 vectors | scales: 3 vectors (the 12 bytes of 6-bit scales and mins) | d[16] | dmin[16] |
//   q6_K:   | ql: 32 vectors | qh: 16 vectors | scales: 4 vectors | d[16] |
//
// In the 4-bit layouts a vector's low nibbles are 4 consecutive levels of each row and its high
// nibbles 4 others (the GGUF nibble order), so packing copies 4 bytes at a time. q8_0's levels are
// stored as w + 128 (unsigned, the operand vpdpbusd multiplies unsigned), and the kernel takes 128
// * (the activation block's sum) back off.

#include <cstddef>
#include <cstdint>

#include "kernels/types.hpp"

namespace strata::kernels {

/// Whether type t has a 16-row packed layout (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, q4_K, q6_K).
bool x16_packable(dtype t);
/// Bytes of one block of a 16-row group: 16 GGUF blocks.
std::size_t x16_block_bytes(dtype t);
/// Packs a GGUF matrix of `rows` rows of k values (src) into dst (as many bytes): the groups, then
/// the rows % 16 left over, copied.
void pack_x16(dtype t, const void* src, std::int64_t rows, std::int64_t k, void* dst);
/// Row `row` of a packed matrix of `rows` rows in the GGUF layout (row_bytes(t, k) bytes at dst):
/// the very bytes pack_x16 took.
void unpack_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, void* dst);
/// Row `row` of a packed matrix, dequantized into dst (k values), as dequantize_row gives it.
void dequantize_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, float* dst);

}  // namespace strata::kernels
