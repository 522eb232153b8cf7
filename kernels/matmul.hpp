#pragma once
// Matrix products against weights of any supported type.

#include <cstdint>

#include "kernels/compute_pool.hpp"
#include "kernels/types.hpp"

namespace strata::kernels {

/// Y[i][r] = sum_j W[r][j] * X[i][j] for i < m, r < rows: W has `rows` rows of `k` elements of
/// type wt (GGUF layout); X (m x k) and Y (m x rows) are f32, row-major. m == 1 is the decode
/// GEMV; m > 1 (prefill, batched decode) reuses each dequantized weight tile across 4 activation
/// rows at a time. Rows are split over the pool. Activations stay f32: the result is what the
/// dequantized weights compute, without rounding the activations.
void matmul(compute_pool& pool, dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x,
            std::int64_t m, float* y);

/// The single-threaded reference: dequantize each row, then a plain dot product in double.
void matmul_reference(dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x, std::int64_t m,
                      float* y);

}  // namespace strata::kernels
