#pragma once
// The small steps of a layer between its projections and its attention on the GPU: a bias added
// to every row, and the batch's keys and values written into their f16 KV pages.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::kernels::cuda {

/// x[r * dim + i] += bias[i] for r < n (the projections' biases of qwen2).
void add_bias(float* x, const float* bias, int n, int dim, cudaStream_t stream);

/// For each of n rows: k[r] and v[r] (dim f32 values each) rounded to f16 (nearest even, as the
/// CPU's convert_row_to_f16) into row slots[r] of the page pools k_pages and v_pages, which hold
/// rows of dim f16 values (slot = page * page_tokens + position in the page). slots is a device array.
void store_kv_f16(const float* k, const float* v, int n, int dim, const std::int32_t* slots, void* k_pages, void* v_pages,
                  cudaStream_t stream);

}  // namespace strata::kernels::cuda
