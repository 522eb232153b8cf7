// Fused layer steps (fused.hpp). Each kernel repeats the arithmetic of the kernels it replaces in
// the same order, so the results match them bit for bit (checked by check_fused.cpp).

#include <algorithm>

#include <cuda_fp16.h>

#include <stdexcept>

#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/fused.hpp"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_block.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int k_threads = 1024;  // as ops.cu's norms: a decode row is one block

/// One row: x += r, then normalized and quantized per 32 values, as rms_norm_quantize_kernel.
/// Thread t touches values t, t + 1024, ... in both passes, so it reads back its own sums.
__global__ void __launch_bounds__(k_threads)
    add_rms_norm_quantize_kernel(float* __restrict__ x, const float* r, const float* __restrict__ w, float* y,
                                 int dim, float eps, std::int8_t* __restrict__ q, float2* __restrict__ ds) {
  pdl_launch_dependents();
  pdl_wait();
  const std::size_t row = blockIdx.x;
  float* xr = x + row * dim;
  const float* rr = r + row * dim;
  float ss = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += k_threads) {
    const float v = xr[i] + rr[i];
    xr[i] = v;
    ss += v * v;
  }
  const float s = 1.0f / sqrtf(block_sum<k_threads>(ss) / static_cast<float>(dim) + eps);
  scale_quantize_row<k_threads>(xr, s, w, y, row, dim, q, ds);
}

/// add_rms_norm_quantize_kernel for dim == V * k_threads, the values in registers through both
/// passes as rms_norm_quantize_regs_kernel (ops.cu); the same operations, so the same bits.
template <int V>
__global__ void __launch_bounds__(k_threads)
    add_rms_norm_quantize_regs_kernel(float* __restrict__ x, const float* r, const float* __restrict__ w, float* y,
                                      int dim, float eps, std::int8_t* __restrict__ q, float2* __restrict__ ds) {
  float wv[V];
  norm_weights_then_wait<k_threads, V>(w, wv);
  const int t = static_cast<int>(threadIdx.x);
  const std::size_t row = blockIdx.x;
  float* xr = x + row * dim;
  const float* rr = r + row * dim;
  float xv[V], rv[V], ss = 0.0f;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    xv[j] = xr[t + j * k_threads];
    rv[j] = rr[t + j * k_threads];
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    xv[j] = xv[j] + rv[j];
    xr[t + j * k_threads] = xv[j];
    ss += xv[j] * xv[j];
  }
  const float s = 1.0f / sqrtf(block_sum<k_threads>(ss) / static_cast<float>(dim) + eps);
  scale_quantize_regs<k_threads, V>(xv, wv, w != nullptr, s, y, row, dim, q, ds);
}

/// One block per (row, head), q heads first, then kv heads; thread i turns pair i as rope_kernel,
/// and a kv head's block then writes its k and v values as store_kv_kernel.
__global__ void rope_store_kv_kernel(rope_kv_args a, rope_args ra) {
  pdl_launch_dependents();
  pdl_wait();
  const int t = static_cast<int>(blockIdx.x), head = static_cast<int>(blockIdx.y);
  const bool is_q = head < a.n_head;
  const int hk = head - a.n_head;
  float* v = is_q ? a.q + (static_cast<long long>(t) * a.n_head + head) * a.head_dim
                  : a.k + (static_cast<long long>(t) * a.n_head_kv + hk) * a.head_dim;
  const int half = ra.n_rot / 2;
  for (int i = static_cast<int>(threadIdx.x); i < half; i += static_cast<int>(blockDim.x)) {
    const float p = static_cast<float>(ra.pos[t]) * ra.freq_scale;
    float theta = p * ra.inv_freq[i];
    if (ra.factors) theta /= ra.factors[i];
    float s, c;
    sincosf(theta, &s, &c);
    const int ia = ra.neox ? i : 2 * i, ib = ra.neox ? i + half : 2 * i + 1;
    const float x0 = v[ia], x1 = v[ib];
    v[ia] = x0 * c - x1 * s;
    v[ib] = x0 * s + x1 * c;
  }
  if (is_q) return;
  __syncthreads();
  const int dim = a.n_head_kv * a.head_dim;
  const long long src = static_cast<long long>(t) * dim + static_cast<long long>(hk) * a.head_dim;
  const int slot = a.slots[t];
  if (slot >= 0) {
    const long long dst = static_cast<long long>(slot) * dim + static_cast<long long>(hk) * a.head_dim;
    auto* kp = static_cast<__half*>(a.k_pages);
    auto* vp = static_cast<__half*>(a.v_pages);
    for (int c = static_cast<int>(threadIdx.x); c < a.head_dim; c += static_cast<int>(blockDim.x)) {
      kp[dst + c] = __float2half_rn(a.k[src + c]);
      vp[dst + c] = __float2half_rn(a.v[src + c]);
    }
    return;
  }
  const int slot8 = a.slots_q8 ? a.slots_q8[t] : -1;
  if (slot8 < 0) return;
  // q8_0: a warp per block of 32 values of the head (blockDim.x is a multiple of 32), as
  // store_kv_q8_kernel; the head's blocks are row_blocks / n_head_kv of the row's.
  const int lane = static_cast<int>(threadIdx.x % 32), warps = static_cast<int>(blockDim.x / 32);
  const long long row_bytes = static_cast<long long>(dim) / 32 * 34;
  auto* kp = static_cast<unsigned char*>(a.k_pages_q8);
  auto* vp = static_cast<unsigned char*>(a.v_pages_q8);
  for (int b = static_cast<int>(threadIdx.x / 32); b < a.head_dim / 32; b += warps) {
    const long long at = static_cast<long long>(slot8) * row_bytes + (static_cast<long long>(hk) * a.head_dim / 32 + b) * 34;
    kv_q8_0_block(a.k[src + b * 32 + lane], lane, kp + at);
    kv_q8_0_block(a.v[src + b * 32 + lane], lane, vp + at);
  }
}

/// A warp per 32 values: silu(g) * u as swiglu_kernel, written back and quantized as quantize_act.
__global__ void swiglu_quantize_kernel(float* __restrict__ g, const float* u, int blocks, std::int8_t* __restrict__ q,
                                       float2* __restrict__ ds) {
  pdl_launch_dependents();
  pdl_wait();
  const int blk = blockIdx.x * (blockDim.x / 32) + static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (blk >= blocks) return;
  const std::size_t i = static_cast<std::size_t>(blk) * 32 + lane;
  const float gv = g[i];
  const float y = gv / (1.0f + expf(-gv)) * u[i];
  g[i] = y;
  quantize_block(y, lane, q + static_cast<std::size_t>(blk) * 32, ds + blk);
}

}  // namespace

void add_rms_norm_quantize(float* x, const float* r, const float* weight, float* y, int n, int dim, float eps, act_q8& xq,
                           cudaStream_t stream) {
  if (n <= 0) return;
  if (n > xq.max_rows || dim != xq.k) throw std::invalid_argument("add_rms_norm_quantize: rows or length differ from the buffer's");
  std::int8_t* q = xq.q.as<std::int8_t>();
  float2* ds = xq.ds.as<float2>();
  const char* what = "add_rms_norm_quantize";
  switch (dim % k_threads == 0 ? dim / k_threads : 0) {
    case 1: return launch_pdl(what, add_rms_norm_quantize_regs_kernel<1>, n, k_threads, 0, stream, x, r, weight, y, dim, eps, q, ds);
    case 2: return launch_pdl(what, add_rms_norm_quantize_regs_kernel<2>, n, k_threads, 0, stream, x, r, weight, y, dim, eps, q, ds);
    case 4: return launch_pdl(what, add_rms_norm_quantize_regs_kernel<4>, n, k_threads, 0, stream, x, r, weight, y, dim, eps, q, ds);
    case 8: return launch_pdl(what, add_rms_norm_quantize_regs_kernel<8>, n, k_threads, 0, stream, x, r, weight, y, dim, eps, q, ds);
    default: launch_pdl(what, add_rms_norm_quantize_kernel, n, k_threads, 0, stream, x, r, weight, y, dim, eps, q, ds);
  }
}

void rope_store_kv(const rope_kv_args& a, const rope_args& rope, cudaStream_t stream) {
  if (a.n <= 0) return;
  if (a.n_head <= 0 || a.n_head_kv <= 0 || a.head_dim <= 0 || rope.n_rot > a.head_dim)
    throw std::invalid_argument("rope_store_kv: heads or n_rot out of range");
  if (a.slots_q8 && a.head_dim % 32 != 0) throw std::invalid_argument("rope_store_kv: q8_0 pages need heads of a multiple of 32 values");
  const dim3 grid(static_cast<unsigned>(a.n), static_cast<unsigned>(a.n_head + a.n_head_kv));
  const int threads = (std::max(a.head_dim / 2, 32) + 31) / 32 * 32;  // whole warps (the q8_0 blocks)
  launch_pdl("rope_store_kv", rope_store_kv_kernel, grid, threads, 0, stream, a, rope);
}

void swiglu_quantize(float* g, const float* u, int n, int dim, act_q8& xq, cudaStream_t stream) {
  if (n <= 0) return;
  if (n > xq.max_rows || dim != xq.k || dim % 32 != 0) throw std::invalid_argument("swiglu_quantize: rows or length differ from the buffer's");
  const int blocks = dim / 32 * n;
  constexpr int per_cta = 8;
  launch_pdl("swiglu_quantize", swiglu_quantize_kernel, (blocks + per_cta - 1) / per_cta, per_cta * 32, 0, stream, g, u, blocks,
             xq.q.as<std::int8_t>(), xq.ds.as<float2>());
}

}  // namespace strata::kernels::cuda
