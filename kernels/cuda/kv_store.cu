// add_bias and store_kv_f16 (kv_store.hpp).

#include <cuda_fp16.h>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/kv_store.hpp"

namespace strata::kernels::cuda {
namespace {

__global__ void add_bias_kernel(float* x, const float* bias, long long n, int dim) {
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

unsigned blocks_for(long long n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void add_bias(float* x, const float* bias, int n, int dim, cudaStream_t stream) {
  const long long total = static_cast<long long>(n) * dim;
  if (total <= 0) return;
  add_bias_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(x, bias, total, dim);
  check_launch("add_bias");
}

void store_kv_f16(const float* k, const float* v, int n, int dim, const std::int32_t* slots, void* k_pages, void* v_pages,
                  cudaStream_t stream) {
  const long long total = static_cast<long long>(n) * dim;
  if (total <= 0) return;
  store_kv_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(k, v, total, dim, slots, static_cast<__half*>(k_pages),
                                                              static_cast<__half*>(v_pages));
  check_launch("store_kv_f16");
}

}  // namespace strata::kernels::cuda
