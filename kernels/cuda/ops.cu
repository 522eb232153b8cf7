// RMSNorm, RoPE and SwiGLU kernels (ops.hpp).

#include <cmath>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/ops.hpp"

namespace strata::kernels::cuda {
namespace {

constexpr int k_norm_threads = 256;

__global__ void __launch_bounds__(k_norm_threads)
    rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* y, int dim, float eps) {
  const float* xr = x + static_cast<std::size_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<std::size_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += k_norm_threads) ss += xr[i] * xr[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xFFFFFFFFu, ss, o);
  __shared__ float part[k_norm_threads / 32];
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < k_norm_threads / 32; ++i) total += part[i];
  const float s = 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += k_norm_threads) yr[i] = w ? xr[i] * s * w[i] : xr[i] * s;
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

void rms_norm(const float* x, const float* weight, float* y, int n, int dim, float eps, cudaStream_t stream) {
  if (n <= 0) return;
  rms_norm_kernel<<<n, k_norm_threads, 0, stream>>>(x, weight, y, dim, eps);
  check_launch("rms_norm");
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
