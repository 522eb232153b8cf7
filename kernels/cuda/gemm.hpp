#pragma once
// Prefill products on the tensor cores: Y = X W^T for many activation rows at once, W uploaded
// by upload_matrix in any matvec type. Each tile of W is dequantized from 16-byte loads to f16 in
// shared memory and multiplied with mma.sync (m16n8k16, f16 in, f32 accumulators, ldmatrix for
// both operands); its speed in kernels/cuda/NOTES.md.

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/matvec.hpp"

namespace strata::kernels::cuda {

/// x (f32, device, n values) to f16 (round to nearest even), for gemm's activations.
void to_f16(const float* x, void* x16, std::int64_t n, cudaStream_t stream);

/// Device scratch bytes gemm may use for m rows of x: k is split over several blocks when the
/// tiles alone would leave the device partly idle (few rows; 0 when it is not split).
std::size_t gemm_workspace(const device_matrix& w, int m);

/// y[i * w.rows + r] = sum_j W[r][j] * x16[i][j] for i < m: x16 is m x w.k f16 (device), y f32.
/// With a workspace of gemm_workspace bytes k may be split (the parts added in a fixed order, so
/// every run gives the same sums); without, it is not.
void gemm(const device_matrix& w, const void* x16, int m, float* y, cudaStream_t stream, void* workspace = nullptr,
          std::size_t workspace_bytes = 0);

}  // namespace strata::kernels::cuda
