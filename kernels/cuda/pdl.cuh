#pragma once
// Programmatic dependent launch (sm_90): a kernel queued with launch_pdl may start while the
// kernel before it on the stream still runs. Its blocks then do what needs nothing of that kernel
// (a matvec loads its first weights: they never change) and call pdl_wait() before they read or
// write anything another kernel touches; pdl_wait returns once the kernel before has finished and
// its writes are visible. Every kernel here calls pdl_launch_dependents() first thing, so the one
// after it may be placed on the multiprocessors as soon as all of its own blocks have started.
// Launches and kernel starts, about 2 us each, then overlap the work of the kernel before (inside
// a CUDA graph too: the capture keeps the edges programmatic). STRATA_CUDA_PDL=0 queues every
// kernel as a plain launch (pdl_wait is then a no-op), for comparison.
// What the kernel before writes is read with ordinary loads (ld.global, __ldca), never through the
// non-coherent path (__ldg, or a const __restrict__ pointer the compiler turns into ld.global.nc):
// that path assumes the data does not change while the kernel lives, and here the kernel lives
// while the one before still writes. The matvecs' activations read by __ldg gave pool hits other
// bits run to run (NOTES.md): ptxas had moved those loads above griddepcontrol.wait, as it may for
// a load whose data is promised not to change. Weights, which never change, may take __ldg.

#include <utility>

#include "kernels/cuda/device.hpp"

namespace strata::kernels::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/// kernel<<<grid, block, smem, stream>>>(args...), allowed to start before the kernel ahead of it
/// on the stream has finished (when pdl_enabled(what)); the kernel must call pdl_wait() first as
/// above.
template <class... Params, class... Args>
void launch_pdl(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled(what) ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
}

}  // namespace strata::kernels::cuda
