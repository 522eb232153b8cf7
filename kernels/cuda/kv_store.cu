// add_bias, store_kv_f16, store_kv_q8_0 and move_pages (kv_store.hpp).

#include <cuda_fp16.h>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/kv_store.hpp"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_block.cuh"

namespace strata::kernels::cuda {
namespace {

__global__ void add_bias_kernel(float* x, const float* bias, long long n, int dim) {
  pdl_launch_dependents();
  pdl_wait();
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += bias[i % dim];
}

__global__ void store_kv_kernel(const float* k, const float* v, long long n, int dim, const std::int32_t* slots, __half* kp,
                                __half* vp) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long r = i / dim, c = i % dim;
  const long long at = static_cast<long long>(slots[r]) * dim + c;
  kp[at] = __float2half_rn(k[i]);
  vp[at] = __float2half_rn(v[i]);
}

/// A warp per block of 32 values of a row: its keys' and its values' block.
__global__ void store_kv_q8_kernel(const float* k, const float* v, long long n_blocks, int row_blocks, const std::int32_t* slots,
                                   unsigned char* kp, unsigned char* vp) {
  const long long w = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (w >= n_blocks) return;
  const long long r = w / row_blocks, b = w % row_blocks;
  const long long at = (static_cast<long long>(slots[r]) * row_blocks + b) * 34;
  kv_q8_0_block(k[w * 32 + lane], lane, kp + at);
  kv_q8_0_block(v[w * 32 + lane], lane, vp + at);
}

/// Block (i, which): entry i's key (which = 0) or value page, 16 bytes a thread and step.
__global__ void move_pages_kernel(uint4* packed, const std::int32_t* blocks, long long units, uint4* kp, uint4* vp, bool to_pages) {
  const long long i = blockIdx.x, which = blockIdx.y;
  uint4* pool = (which == 0 ? kp : vp) + static_cast<long long>(blocks[i]) * units;
  uint4* part = packed + (2 * i + which) * units;
  for (long long u = threadIdx.x; u < units; u += blockDim.x) {
    if (to_pages) pool[u] = part[u];
    else part[u] = pool[u];
  }
}

unsigned blocks_for(long long n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void add_bias(float* x, const float* bias, int n, int dim, cudaStream_t stream) {
  const long long total = static_cast<long long>(n) * dim;
  if (total <= 0) return;
  launch_pdl("add_bias", add_bias_kernel, blocks_for(total, 256), 256, 0, stream, x, bias, total, dim);
}

void store_kv_f16(const float* k, const float* v, int n, int dim, const std::int32_t* slots, void* k_pages, void* v_pages,
                  cudaStream_t stream) {
  const long long total = static_cast<long long>(n) * dim;
  if (total <= 0) return;
  store_kv_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(k, v, total, dim, slots, static_cast<__half*>(k_pages),
                                                              static_cast<__half*>(v_pages));
  check_launch("store_kv_f16");
}

void store_kv_q8_0(const float* k, const float* v, int n, int dim, const std::int32_t* slots, void* k_pages, void* v_pages,
                   cudaStream_t stream) {
  if (dim % 32 != 0) throw cuda_error("store_kv_q8_0: rows of a multiple of 32 values only");
  const long long n_blocks = static_cast<long long>(n) * (dim / 32);
  if (n_blocks <= 0) return;
  store_kv_q8_kernel<<<blocks_for(n_blocks * 32, 256), 256, 0, stream>>>(k, v, n_blocks, dim / 32, slots, static_cast<unsigned char*>(k_pages),
                                                                         static_cast<unsigned char*>(v_pages));
  check_launch("store_kv_q8_0");
}

void move_pages(void* packed, const std::int32_t* blocks, int n, std::size_t page_bytes, void* k_pages, void* v_pages,
                bool to_pages, cudaStream_t stream) {
  if (n <= 0) return;
  if (page_bytes % 16 != 0) throw cuda_error("move_pages: pages of a size that is not a multiple of 16 bytes");
  move_pages_kernel<<<dim3(static_cast<unsigned>(n), 2), 256, 0, stream>>>(static_cast<uint4*>(packed), blocks,
                                                                          static_cast<long long>(page_bytes / 16),
                                                                          static_cast<uint4*>(k_pages), static_cast<uint4*>(v_pages), to_pages);
  check_launch("move_pages");
}

}  // namespace strata::kernels::cuda
