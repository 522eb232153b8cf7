#pragma once
// Prefill products on the tensor cores: Y = X W^T for many activation rows at once, W uploaded
// by upload_matrix in any matvec type. Each tile of W is dequantized to f16 in shared memory and
// multiplied with mma.sync (m16n8k16, f16 in, f32 accumulators). A first version: correct on
// every type, its speed in kernels/cuda/NOTES.md.

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/matvec.hpp"

namespace strata::kernels::cuda {

/// x (f32, device, n values) to f16 (round to nearest even), for gemm's activations.
void to_f16(const float* x, void* x16, std::int64_t n, cudaStream_t stream);

/// y[i * w.rows + r] = sum_j W[r][j] * x16[i][j] for i < m: x16 is m x w.k f16 (device), y f32.
void gemm(const device_matrix& w, const void* x16, int m, float* y, cudaStream_t stream);

}  // namespace strata::kernels::cuda
