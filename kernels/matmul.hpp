#pragma once
// Matrix products against weights of any supported type.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "kernels/compute_pool.hpp"
#include "kernels/simd.hpp"
#include "kernels/types.hpp"

namespace strata::kernels {

/// From this many activation rows on, f32/f16/bf16 weights take f32 tiles with register-blocked
/// FMA instead of row dots.
constexpr std::int64_t k_gemm_min_m = 16;

/// Y[i][r] = sum_j W[r][j] * X[i][j] for i < m, r < rows: W has `rows` rows of `k` elements of
/// type wt (GGUF layout); X (m x k) and Y (m x rows) are f32, row-major. Rows are split over the
/// pool.
///  - Quantized W: X is quantized to 8 bits first (per 32 values for the 32-value block types,
///    per 256 with sums per 16 for K-quants) and each weight row is dotted in its GGUF layout with integer
///    products; for m > 1 blocks of 16 weight rows go through the row GEMM kernels.
///  - f32/f16/bf16 W: X stays f32; small m uses row dots, m >= k_gemm_min_m expands 16 weight rows
///    at a time to f32 and runs a register-blocked FMA kernel.
/// Every m runs the same operations for each output (the FMA tiles those of the row dots), so a
/// row's result is the same bits whatever batch it is in (kernels/batch_invariance.test.cpp). Scratch buffers are per thread and grow on first
/// use only.
///  - W with `packed` (pack_x16: its rows / 16 groups, then the rows % 16 left over in the GGUF
///    layout; made where kernel_table::packed_gemm has the type): the groups go through the
///    packed kernel, the last rows through the row dots, all read from `packed`, for every m.
void matmul(compute_pool& pool, dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x,
            std::int64_t m, float* y, const void* packed = nullptr);
/// The same with an explicit kernel level (tests and benchmarks compare levels with it).
void matmul(compute_pool& pool, const kernel_table& kt, dtype wt, const void* w, std::int64_t rows, std::int64_t k,
            const float* x, std::int64_t m, float* y, const void* packed = nullptr);

/// One product of matmul_many: W (rows x k, type `type`, `packed` as for matmul) into Y (m x rows).
struct matmul_out {
  dtype type = dtype::f32;
  const void* w = nullptr;
  std::int64_t rows = 0;
  float* y = nullptr;
  const void* packed = nullptr;
};
/// Most products one matmul_many call takes.
constexpr std::size_t k_matmul_max_outputs = 4;

/// matmul for several weights against the same X (a layer's q, k and v, or its gate and up): X is
/// quantized once, and the rows of every W are spread over the pool in one job, so the workers
/// meet once instead of once per weight. Each Y gets exactly what matmul would give it. Weights
/// whose activations are prepared differently (float weights, or another quantization family)
/// are done one after the other.
void matmul_many(compute_pool& pool, const kernel_table& kt, std::span<const matmul_out> outs, std::int64_t k, const float* x,
                 std::int64_t m);

/// One expert's share of a grouped product: activation rows [first, first + count) of X go
/// through expert `expert`'s matrix of each stacked weight.
struct expert_rows {
  std::int32_t expert = 0;
  std::int64_t first = 0;
  std::int64_t count = 0;
};

/// A stacked weight of a grouped product: matrices of `rows` rows of k elements of type `type`,
/// one per expert, one after the other (GGUF's 3-D expert tensors); y is (X's rows x rows).
/// `packed`, when given (and kernel_table::packed_gemm has the type): the same stack with each
/// expert's matrix packed on its own by pack_x16, in as many bytes; it is read instead of w.
struct grouped_out {
  dtype type = dtype::f32;
  const void* w = nullptr;
  std::int64_t rows = 0;
  float* y = nullptr;
  const void* packed = nullptr;
};

/// The experts' products of a mixture-of-experts block, in one pool job: X (the tokens' rows,
/// gathered so that each expert's rows are contiguous) is prepared once, and every (expert, weight,
/// run of rows) is a task handed out as workers free up. Each expert's matrix is read once
/// whatever the number of rows that chose it (a prefill batch, or several decoded sequences), and
/// only the experts listed are read. Row i of Y is what matmul of row i against that expert's
/// matrix gives, up to the order of float additions. Weights (at most k_matmul_max_outputs) that
/// share an activation format (gate and up) share the job; otherwise each is done in its own.
///  - Packed weights: each expert's rows are interleaved on their own (interleave_q8_x8) and go
///    through the packed kernel for every count, one row (decode) included, so a row gets the
///    same bits whatever the number of rows that share its expert.
///  - `source` (quantized weights only): row i of the gathered X is row source[i] of x, which
///    then holds the tokens' rows, each quantized once however many experts chose it, instead of
///    a copy per expert. The results are the same bits as with the gathered rows.
void matmul_grouped(compute_pool& pool, const kernel_table& kt, std::span<const grouped_out> outs, std::span<const expert_rows> groups,
                    std::int64_t k, const float* x, const std::int32_t* source = nullptr);

/// A mixture of experts' two grouped products in one pool job: `first` (gate and up, sharing an
/// activation format) against X as matmul_grouped takes it, then `between(group)` once per group
/// (the expert's activation: it turns the group's rows of first's outputs into second_x), then
/// `second` (down) against second_x (X's rows x first[0].rows). A group's second product starts as
/// soon as its first products are done, on whichever thread is free: the thread that finishes a
/// group's last first-product run calls between and prepares that group's rows of second_x, so
/// the pool's workers meet once per layer instead of twice, and the activation and its
/// quantization run while the other workers still stream weights. Every row gets the very bits
/// of matmul_grouped(first), between, matmul_grouped(second). Float weights, or a second product
/// with float activations, take those three steps one after the other. `between` runs on a pool
/// thread inside the job: it must not use the pool itself.
void matmul_experts(compute_pool& pool, const kernel_table& kt, std::span<const grouped_out> first, const grouped_out& second,
                    std::span<const expert_rows> groups, std::int64_t k, const float* x, const std::int32_t* source,
                    const float* second_x, const std::function<void(const expert_rows& group)>& between);

/// The single-threaded exact reference: dequantize each row, then a plain dot product in double
/// against the unrounded activations.
void matmul_reference(dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x, std::int64_t m,
                      float* y);

}  // namespace strata::kernels
