#pragma once
// What a q4_0 KV cache does to its rows so that 4 bits per value lose as little as they can.
//
// Keys and values of trained models have a few channels far larger than the rest; a 32-value
// block's 4-bit scale then fits the outlier and crushes its neighbours. Before quantization, K and
// V are rotated by a fixed orthonormal map R (a pseudo-random sign diagonal, then the
// Walsh-Hadamard transform, over pieces of 32 values or of a whole head): an outlier spreads over
// its piece and each block comes out close to Gaussian. The queries are rotated as the keys are,
// so every q.k is unchanged; the attention output, a weighted sum of rotated values, is R times
// the true one and is turned back by R's transpose. Each block's scale is then fitted to its
// values (least squared error over a few candidates) rather than taken from their largest
// magnitude. src/model/q4_kv.hpp says which piece each of K, Q and V gets.
//
// The stored bytes are GGUF q4_0 blocks either way; only what they mean (rotated values) differs
// from a plain q4_0 cache.

#include <cstdint>

#include "kernels/quants.hpp"

namespace strata::kernels {

/// The width R works over for heads of head_dim values: the largest power of two dividing
/// head_dim, at most 512 (the whole head for 64, 128 or 256; blocks of 32 for 96).
int rotation_width(int head_dim);

/// In place, each piece of `width` values of x (n a multiple of width, width a power of two up to
/// 512) becomes R x = H D x / sqrt(width): D flips the signs of a fixed pseudo-random pattern, H is
/// the width-point Walsh-Hadamard transform. Orthonormal: dot products and norms are kept.
void rotate_pieces(float* x, std::int64_t n, int width);

/// The inverse of rotate_pieces (R's transpose, D H x / sqrt(width)).
void unrotate_pieces(float* x, std::int64_t n, int width);

/// n values (a multiple of 32) to q4_0 blocks, each block's scale chosen to minimise its squared
/// error: candidates map the largest magnitude a little inside and outside the most negative
/// level, each gets its least-squares scale for the levels it picked, and the best, rounded to f16,
/// sets the final levels. Up to the f16 rounding of the scale, never worse on a block than
/// quantize_row's mapping of the largest magnitude onto -8 (the first candidate, refitted).
void quantize_q4_0_fitted(const float* x, block_q4_0* dst, std::int64_t n);

}  // namespace strata::kernels
