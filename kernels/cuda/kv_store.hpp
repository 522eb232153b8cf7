#pragma once
// The small steps of a layer between its projections and its attention on the GPU: a bias added
// to every row, and the batch's keys and values written into their f16 KV pages; and the pages
// moved between their pools and a packed buffer (KV blocks on their way to or from host RAM).

#include <cstddef>
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

/// As store_kv_f16, into q8_0 pages: each row's dim values (a multiple of 32) become dim / 32
/// blocks of an f16 scale and 32 int8 (34 bytes), the bytes kernels::quantize_row(q8_0) writes
/// for the same f32 row (scale amax / 127 rounded to nearest-even f16, levels lround(v / scale)
/// in f32), so that pages move between the GPU and the host tiers by value.
void store_kv_q8_0(const float* k, const float* v, int n, int dim, const std::int32_t* slots, void* k_pages, void* v_pages,
                   cudaStream_t stream);

/// Moves n blocks' pages between the page pools and `packed`, which holds entry i's key page then
/// its value page (page_bytes each, a multiple of 16): into k_pages and v_pages at page blocks[i]
/// (to_pages), or out of them. blocks is a device array. One launch for a whole chunk of blocks,
/// where a copy per page would cost a call each.
void move_pages(void* packed, const std::int32_t* blocks, int n, std::size_t page_bytes, void* k_pages, void* v_pages,
                bool to_pages, cudaStream_t stream);

}  // namespace strata::kernels::cuda
