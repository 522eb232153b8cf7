#pragma once
// The sum of one value from every thread of a block, the same in every thread and added in the
// same order wherever it is used: the norms take their sum of squares through it, so the fused
// kernels (fused.cu) and the plain ones (ops.cu) give the same bits.

namespace strata::kernels::cuda {

/// Threads: the block's size, a multiple of 32. Every thread of the block must call it.
template <int Threads>
__device__ __forceinline__ float block_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  __shared__ float part[Threads / 32];
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < Threads / 32; ++i) total += part[i];
  return total;
}

}  // namespace strata::kernels::cuda
