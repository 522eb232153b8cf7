// RMSNorm, RoPE and SwiGLU kernels (ops.hpp).

#include <cmath>
#include <stdexcept>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/ops.hpp"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_block.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int k_norm_threads = 1024;  // a decode row is one block: 4 values a thread at d = 4096

/// 1 / rms of one row of dim values, the same in every thread of the block.
__device__ float inv_rms(const float* xr, int dim, float eps) {
  float ss = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += k_norm_threads) ss += xr[i] * xr[i];
  return 1.0f / sqrtf(block_sum<k_norm_threads>(ss) / static_cast<float>(dim) + eps);
}

__global__ void __launch_bounds__(k_norm_threads)
    rms_norm_kernel(const float* x, const float* __restrict__ w, float* y, int dim, float eps) {
  pdl_launch_dependents();
  pdl_wait();
  const float* xr = x + static_cast<std::size_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<std::size_t>(blockIdx.x) * dim;
  const float s = inv_rms(xr, dim, eps);
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += k_norm_threads) yr[i] = w ? xr[i] * s * w[i] : xr[i] * s;
}

/// Each warp normalizes blocks of 32 values and quantizes them as quantize_act does.
__global__ void __launch_bounds__(k_norm_threads)
    rms_norm_quantize_kernel(const float* x, const float* __restrict__ w, float* y, int dim, float eps,
                             std::int8_t* __restrict__ q, float2* __restrict__ ds) {
  pdl_launch_dependents();
  pdl_wait();
  const std::size_t row = blockIdx.x;
  const float* xr = x + row * dim;
  const float s = inv_rms(xr, dim, eps);
  scale_quantize_row<k_norm_threads>(xr, s, w, y, row, dim, q, ds);
}

/// rms_norm_quantize_kernel for dim == V * k_norm_threads (d = 4096: V = 4): thread t keeps its
/// values t, t + 1024, ... in registers through both passes, which are the values its warp rounds
/// in the second (block b = warp + 32 j), and loads its weights before pdl_wait; the loop version
/// waited a memory trip per block of the second pass. The same operations in the same order, so
/// the same bits.
template <int V>
__global__ void __launch_bounds__(k_norm_threads)
    rms_norm_quantize_regs_kernel(const float* x, const float* __restrict__ w, float* y, int dim, float eps,
                                  std::int8_t* __restrict__ q, float2* __restrict__ ds) {
  float wv[V];
  norm_weights_then_wait<k_norm_threads, V>(w, wv);
  const int t = static_cast<int>(threadIdx.x);
  const std::size_t row = blockIdx.x;
  const float* xr = x + row * dim;
  float xv[V], ss = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) xv[j] = xr[t + j * k_norm_threads];
#pragma unroll
  for (int j = 0; j < V; ++j) ss += xv[j] * xv[j];
  const float s = 1.0f / sqrtf(block_sum<k_norm_threads>(ss) / static_cast<float>(dim) + eps);
  scale_quantize_regs<k_norm_threads, V>(xv, wv, w != nullptr, s, y, row, dim, q, ds);
}

__global__ void add_kernel(const float* a, const float* b, float* y, long long n) {
  pdl_launch_dependents();
  pdl_wait();
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

__global__ void rope_kernel(float* x, int n_tokens, int n_heads, int head_dim, rope_args a) {
  const int half = a.n_rot / 2;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(n_tokens) * n_heads * half) return;
  const int i = static_cast<int>(idx % half);
  const long long th = idx / half;  // token * n_heads + head
  const int t = static_cast<int>(th / n_heads);
  const float p = static_cast<float>(a.pos[t]) * a.freq_scale;
  float theta = p * a.inv_freq[i];
  if (a.factors) theta /= a.factors[i];
  float s, c;
  sincosf(theta, &s, &c);
  float* v = x + th * head_dim;
  const int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half : 2 * i + 1;
  const float x0 = v[ia], x1 = v[ib];
  v[ia] = x0 * c - x1 * s;
  v[ib] = x0 * s + x1 * c;
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

unsigned blocks_for(long long n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void rms_norm_quantize(const float* x, const float* weight, float* y, int n, int dim, float eps, act_q8& xq,
                       cudaStream_t stream) {
  if (n <= 0) return;
  if (n > xq.max_rows || dim != xq.k) throw std::invalid_argument("rms_norm_quantize: rows or length differ from the buffer's");
  std::int8_t* q = xq.q.as<std::int8_t>();
  float2* ds = xq.ds.as<float2>();
  switch (dim % k_norm_threads == 0 ? dim / k_norm_threads : 0) {
    case 1: return launch_pdl("rms_norm_quantize", rms_norm_quantize_regs_kernel<1>, n, k_norm_threads, 0, stream, x, weight, y, dim, eps, q, ds);
    case 2: return launch_pdl("rms_norm_quantize", rms_norm_quantize_regs_kernel<2>, n, k_norm_threads, 0, stream, x, weight, y, dim, eps, q, ds);
    case 4: return launch_pdl("rms_norm_quantize", rms_norm_quantize_regs_kernel<4>, n, k_norm_threads, 0, stream, x, weight, y, dim, eps, q, ds);
    case 8: return launch_pdl("rms_norm_quantize", rms_norm_quantize_regs_kernel<8>, n, k_norm_threads, 0, stream, x, weight, y, dim, eps, q, ds);
    default: launch_pdl("rms_norm_quantize", rms_norm_quantize_kernel, n, k_norm_threads, 0, stream, x, weight, y, dim, eps, q, ds);
  }
}

void add(const float* a, const float* b, float* y, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl("add", add_kernel, blocks_for(n, 256), 256, 0, stream, a, b, y, static_cast<long long>(n));
}

void rms_norm(const float* x, const float* weight, float* y, int n, int dim, float eps, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl("rms_norm", rms_norm_kernel, n, k_norm_threads, 0, stream, x, weight, y, dim, eps);
}

std::vector<float> rope_inv_freq(int n_rot, float freq_base) {
  std::vector<float> inv(static_cast<std::size_t>(n_rot / 2));
  for (int i = 0; i < n_rot / 2; ++i)
    inv[static_cast<std::size_t>(i)] = std::pow(freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
  return inv;
}

void rope(float* x, int n_tokens, int n_heads, int head_dim, const rope_args& a, cudaStream_t stream) {
  const long long n = static_cast<long long>(n_tokens) * n_heads * (a.n_rot / 2);
  if (n <= 0) return;
  rope_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, n_tokens, n_heads, head_dim, a);
  check_launch("rope");
}

void swiglu(const float* gate, const float* up, float* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  swiglu_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, out, n);
  check_launch("swiglu");
}

}  // namespace strata::kernels::cuda
