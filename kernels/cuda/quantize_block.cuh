#pragma once
// One block of 32 activations (one value per lane of a warp) rounded to 8 bits, as act_q8 holds
// them: levels round(v * 127 / amax), the block's (d = amax / 127, d * sum of its levels). Shared
// by quantize_act and rms_norm_quantize so that both give the same bytes.

#include <cstddef>
#include <cstdint>

#include <cuda_fp16.h>

#include "kernels/cuda/pdl.cuh"

namespace strata::kernels::cuda {

__device__ __forceinline__ void quantize_block(float v, int lane, std::int8_t* q, float2* ds) {
  float amax = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const int l = max(-127, min(127, __float2int_rn(v * inv)));
  q[lane] = static_cast<std::int8_t>(l);
  int sum = l;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
  const float d = amax / 127.0f;
  if (lane == 0) *ds = make_float2(d, d * static_cast<float>(sum));
}

/// One q8_0 block of a KV page (32 values, a value per lane) written at dst: an f16 scale and 32
/// int8, the bytes of kernels' quant_q8_0 step for step (d = amax / 127 rounded to f16 nearest
/// even, levels lround(v / d) in f32). Shared by store_kv_q8_0 and rope_store_kv.
__device__ __forceinline__ void kv_q8_0_block(float x, int lane, unsigned char* dst) {
  float amax = fabsf(x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  dst[2 + lane] = static_cast<unsigned char>(static_cast<signed char>(lroundf(x * id)));
  // The scale as one 16-bit store (the block starts on an even byte: 34-byte blocks from an
  // aligned pool).
  if (lane == 0) *reinterpret_cast<unsigned short*>(dst) = __half_as_ushort(__float2half_rn(d));
}

/// The second pass of a norm over row `row` of dim values (xr: its values), a warp per block of
/// 32: each value times s (and w where given) is written to y (where given) and rounded to 8 bits
/// into q and ds. Shared by rms_norm_quantize and the fused add + norm, so that both give the same
/// bytes.
template <int Threads>
__device__ __forceinline__ void scale_quantize_row(const float* xr, float s, const float* w, float* y, std::size_t row, int dim,
                                                   std::int8_t* q, float2* ds) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int b = static_cast<int>(threadIdx.x / 32); b < dim / 32; b += Threads / 32) {
    const int i = 32 * b + lane;
    const float v = w ? xr[i] * s * w[i] : xr[i] * s;
    if (y) y[row * dim + i] = v;
    quantize_block(v, lane, q + row * dim + 32 * b, ds + row * (dim / 32) + b);
  }
}

/// scale_quantize_row for a row of dim == V * Threads values whose thread t holds values
/// t + j * Threads in xv[j] (and the weights in wv[j] when weighted): warp w's j-th block is block
/// w + j * Threads / 32, as in scale_quantize_row, and each value is computed by the same
/// operations, so both give the same bytes.
template <int Threads, int V>
__device__ __forceinline__ void scale_quantize_regs(const float (&xv)[V], const float (&wv)[V], bool weighted, float s, float* y,
                                                    std::size_t row, int dim, std::int8_t* q, float2* ds) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = t + j * Threads, b = i / 32;
    const float v = weighted ? xv[j] * s * wv[j] : xv[j] * s;
    if (y) y[row * dim + i] = v;
    quantize_block(v, lane, q + row * dim + 32 * b, ds + row * (dim / 32) + b);
  }
}

/// The start of a norm kernel that keeps its row in registers (thread t: values t + j * Threads):
/// lets the next kernel be placed, loads the thread's norm weights (0 without weights) while the
/// kernel before still runs (they never change), then waits for that kernel (pdl.cuh).
template <int Threads, int V>
__device__ __forceinline__ void norm_weights_then_wait(const float* w, float (&wv)[V]) {
  pdl_launch_dependents();
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < V; ++j) wv[j] = w ? w[t + j * Threads] : 0.0f;
  pdl_wait();
}

}  // namespace strata::kernels::cuda
