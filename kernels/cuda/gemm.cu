// The prefill GEMM (gemm.hpp). A block of 256 threads (8 warps, 2 x 4, each 64 x 32) computes a
// 128 x 128 tile of Y (128 activation rows by 128 weight rows), stepping through k 64 values at a
// time with two shared-memory stages:
//  - the activations' tile (f16) is copied with cp.async, the next step's in flight while the
//    tensor cores work on this one;
//  - each thread takes 32 values (one 32-value block of every type) of one weight row: the next
//    step's bytes are loaded in 16-byte units before this step's products and dequantized after
//    them, then stored to the other stage as four 16-byte stores;
//  - both operands reach the mma.sync fragments through ldmatrix (six per 16 m16n8k16 a warp).
// One barrier per step. Each dequantized weight serves 128 activation rows, each activation 128
// weight rows. A batch of few rows (batched decode) makes few blocks: then k is split over up to 8
// blocks per tile, each writing its partial sums to a workspace, added in a fixed order by a
// second kernel (the same sums on every run).

#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/mma.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int k_threads = 256, k_bn = 128, k_bk = 64;
constexpr int k_max_splits = 8, k_min_split_steps = 4;  // a split takes at least 4 steps of k
constexpr int k_ld = k_bk + 8;  // row pitch in halves: 144 bytes, so ldmatrix's 8 rows fall in distinct banks
/// Activation rows per block: 32 * MI (each warp 16 * MI of them), the stages' bytes.
template <int MI>
__host__ __device__ constexpr int block_rows() { return 32 * MI; }
template <int MI>
constexpr int smem_bytes() { return 2 * (block_rows<MI>() + k_bn) * k_ld * 2; }

/// The bytes of one weight row's 32-value block j (j a multiple of 32), as loaded before the
/// products: up to four 16-byte units of quants, 16 bytes of a K-quant super-block's header (or
/// q6_K's scales), and the side scales.
struct raw32 {
  uint4 w[4];
  uint4 hdr;
  float d, m;
  int j;
};

__device__ __forceinline__ float h2f(const std::uint8_t* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }
__device__ __forceinline__ uint4 ld16(const std::uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
/// Byte i of u, by shifts (indexing its bytes through memory would put u on the stack).
__device__ __forceinline__ unsigned byte_at(const uint4& u, int i) {
  const unsigned w = i < 8 ? (i < 4 ? u.x : u.y) : (i < 12 ? u.z : u.w);
  return (w >> (8 * (i % 4))) & 0xFFu;
}

template <dtype t>
__device__ __forceinline__ void load32(const std::uint8_t* q, const std::uint8_t* s, int j, raw32& r) {
  r.j = j;
  if constexpr (t == dtype::f16 || t == dtype::bf16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) r.w[i] = ld16(q + 2 * j + 16 * i);
  } else if constexpr (t == dtype::q8_0) {
    r.w[0] = ld16(q + j);
    r.w[1] = ld16(q + j + 16);
    r.d = h2f(s + 2 * (j / 32));
  } else if constexpr (t == dtype::q4_0 || t == dtype::q4_1) {
    const int b = j / 32;
    r.w[0] = ld16(q + 16 * b);
    r.d = h2f(s + (t == dtype::q4_0 ? 2 : 4) * b);
    r.m = t == dtype::q4_0 ? -8.0f * r.d : h2f(s + 4 * b + 2);
  } else if constexpr (t == dtype::q4_k || t == dtype::q5_k) {
    constexpr bool five = t == dtype::q5_k;
    const std::uint8_t* b = q + (j / 256) * (five ? 176 : 144);
    const int g = (j % 256) / 64;
    r.hdr = ld16(b);
    r.w[0] = ld16(b + (five ? 48 : 16) + 32 * g);
    r.w[1] = ld16(b + (five ? 64 : 32) + 32 * g);
    if (five) {
      r.w[2] = ld16(b + 16);
      r.w[3] = ld16(b + 32);
    }
  } else if constexpr (t == dtype::q6_k) {
    const std::uint8_t* b = q + (j / 256) * 208;
    const int jj = j % 256, h = jj / 128, run = (jj % 128) / 32;
    r.w[0] = ld16(b + 64 * h + (run % 2) * 32);
    r.w[1] = ld16(b + 64 * h + (run % 2) * 32 + 16);
    r.w[2] = ld16(b + 128 + 32 * h);
    r.w[3] = ld16(b + 128 + 32 * h + 16);
    r.hdr = ld16(b + 192);
    r.d = h2f(s + 2 * (j / 256));
  }
}

/// Level l (0..31) of the block as a float; the K-quants' sub-block scale and min are made once.
template <dtype t>
__device__ __forceinline__ void dequant32(const raw32& r, float* v) {
  if constexpr (t == dtype::f16) {
    const __half* h = reinterpret_cast<const __half*>(r.w);
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = __half2float(h[i]);
  } else if constexpr (t == dtype::bf16) {
    const std::uint16_t* h = reinterpret_cast<const std::uint16_t*>(r.w);
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = __uint_as_float(static_cast<unsigned>(h[i]) << 16);
  } else if constexpr (t == dtype::q8_0) {
    const std::int8_t* l = reinterpret_cast<const std::int8_t*>(r.w);
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = r.d * static_cast<float>(l[i]);
  } else if constexpr (t == dtype::q4_0 || t == dtype::q4_1) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int b = static_cast<int>(byte_at(r.w[0], i));
      v[i] = r.d * static_cast<float>(b & 0xF) + r.m;
      v[i + 16] = r.d * static_cast<float>(b >> 4) + r.m;
    }
  } else if constexpr (t == dtype::q4_k || t == dtype::q5_k) {
    const int jj = r.j % 256, g = jj / 64, hi = (jj % 64) / 32, sub = 2 * g + hi;
    unsigned sc, mn;
    if (sub < 4) {
      sc = byte_at(r.hdr, 4 + sub) & 63;
      mn = byte_at(r.hdr, 8 + sub) & 63;
    } else {
      sc = (byte_at(r.hdr, 8 + sub) & 0xF) | ((byte_at(r.hdr, sub) >> 6) << 4);
      mn = (byte_at(r.hdr, 8 + sub) >> 4) | ((byte_at(r.hdr, sub + 4) >> 6) << 4);
    }
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.hdr.x & 0xFFFFu))) * static_cast<float>(sc);
    const float m = __half2float(__ushort_as_half(static_cast<unsigned short>(r.hdr.x >> 16))) * static_cast<float>(mn);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      unsigned l = (byte_at(r.w[i / 16], i % 16) >> (4 * hi)) & 0xF;
      if constexpr (t == dtype::q5_k) l |= ((byte_at(r.w[2 + i / 16], i % 16) >> sub) & 1) << 4;
      v[i] = d * static_cast<float>(l) - m;
    }
  } else if constexpr (t == dtype::q6_k) {
    const int jj = r.j % 256, h = jj / 128, run = (jj % 128) / 32;
    const float d0 = r.d * static_cast<float>(static_cast<std::int8_t>(byte_at(r.hdr, 8 * h + 2 * run)));
    const float d1 = r.d * static_cast<float>(static_cast<std::int8_t>(byte_at(r.hdr, 8 * h + 2 * run + 1)));
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int level = static_cast<int>(((byte_at(r.w[i / 16], i % 16) >> (run / 2 * 4)) & 0xF) |
                                         (((byte_at(r.w[2 + i / 16], i % 16) >> (2 * run)) & 3) << 4));
      v[i] = (i < 16 ? d0 : d1) * static_cast<float>(level - 32);
    }
  }
}

template <dtype t, int MI>
__global__ void __launch_bounds__(k_threads)
    gemm_kernel(const std::uint8_t* __restrict__ q, std::size_t q_row, const std::uint8_t* __restrict__ s,
                std::size_t s_row, int rows, int k, const __half* __restrict__ x, int m, float* __restrict__ y, int split_k) {
  constexpr int k_bm = block_rows<MI>();
  // This block's part of k, [kb, ke) (all of it unless split), and where its sums go: y, or the
  // workspace's z-th m x rows slab.
  const int z = static_cast<int>(blockIdx.z), kb = z * split_k, ke = min(k, kb + split_k);
  y += static_cast<std::size_t>(z) * m * rows;
  extern __shared__ __align__(16) unsigned char smem[];
  __half* as = reinterpret_cast<__half*>(smem);  // [2][k_bm][k_ld]
  __half* bs = as + 2 * k_bm * k_ld;             // [2][k_bn][k_ld]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int m0 = static_cast<int>(blockIdx.y) * k_bm, n0 = static_cast<int>(blockIdx.x) * k_bn;
  const int wm = (warp / 4) * 16 * MI, wn = (warp % 4) * 32;  // this warp's 16 MI x 32 of the tile
  const int g = lane / 4, tg = lane % 4, li = lane / 8, lj = lane % 8;
  float c[MI][4][4] = {};

  // The weights this thread stages: row tid / 2, values (tid % 2) * 32 .. + 32 of each step.
  // Rows past the end read row 0 and stage zeros; so do blocks past k.
  const int br = tid / 2, bj = (tid % 2) * 32;
  const bool b_live = n0 + br < rows;
  const std::uint8_t* qb = q + static_cast<std::size_t>(b_live ? n0 + br : 0) * q_row;
  const std::uint8_t* sb = s + static_cast<std::size_t>(b_live ? n0 + br : 0) * s_row;
  auto load_a = [&](int k0, int st) {
#pragma unroll
    for (int i = 0; i < k_bm * (k_bk / 8) / k_threads; ++i) {
      const int c16 = tid + i * k_threads, row = c16 / (k_bk / 8), col = (c16 % (k_bk / 8)) * 8;
      const bool live = m0 + row < m && k0 + col < ke;
      cp_async16(as + (st * k_bm + row) * k_ld + col, live ? x + static_cast<std::size_t>(m0 + row) * k + k0 + col : x, live);
    }
    cp_async_commit();
  };
  raw32 raw;
  auto load_b = [&](int k0) { load32<t>(qb, sb, min(k0 + bj, ke - 32), raw); };
  auto store_b = [&](int k0, int st) {
    float v[32];
    dequant32<t>(raw, v);
    const bool live = b_live && k0 + bj < ke;
    uint4* dst = reinterpret_cast<uint4*>(bs + (st * k_bn + br) * k_ld + bj);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint4 u;
      u.x = live ? pack_half2(v[8 * i], v[8 * i + 1]) : 0u;
      u.y = live ? pack_half2(v[8 * i + 2], v[8 * i + 3]) : 0u;
      u.z = live ? pack_half2(v[8 * i + 4], v[8 * i + 5]) : 0u;
      u.w = live ? pack_half2(v[8 * i + 6], v[8 * i + 7]) : 0u;
      dst[i] = u;
    }
  };

  load_a(kb, 0);
  load_b(kb);
  store_b(kb, 0);
  cp_async_wait<0>();
  __syncthreads();
  const int steps = (ke - kb + k_bk - 1) / k_bk;
  for (int it = 0; it < steps; ++it) {
    const int st = it & 1, k1 = kb + (it + 1) * k_bk;
    const bool more = it + 1 < steps;
    if (more) {
      load_a(k1, st ^ 1);
      load_b(k1);
    }
    const __half* a_s = as + st * k_bm * k_ld;
    const __half* b_s = bs + st * k_bn * k_ld;
#pragma unroll
    for (int kk = 0; kk < k_bk; kk += 16) {
      unsigned a[MI][4], b[4][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) ldmatrix_x4(a[i], a_s + (wm + 16 * i + lj + 8 * (li % 2)) * k_ld + kk + 8 * (li / 2));
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        unsigned r4[4];
        ldmatrix_x4(r4, b_s + (wn + 8 * j + 8 * (li / 2) + lj) * k_ld + kk + 8 * (li % 2));
        b[j][0] = r4[0];
        b[j][1] = r4[1];
        b[j + 1][0] = r4[2];
        b[j + 1][1] = r4[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) mma16816(c[i][j], a[i], b[j]);
      }
    }
    if (more) {
      store_b(k1, st ^ 1);
      cp_async_wait<0>();
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + wm + 16 * i + g + (e >= 2 ? 8 : 0), col = n0 + wn + 8 * j + 2 * tg + (e & 1);
        if (row < m && col < rows) y[static_cast<std::size_t>(row) * rows + col] = c[i][j][e];
      }
    }
  }
}

/// y = the sum of the splits' slabs, in split order.
__global__ void sum_splits_kernel(const float* __restrict__ ws, int splits, long long n, float* __restrict__ y) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float sum = 0.0f;
  for (int z = 0; z < splits; ++z) sum += ws[static_cast<std::size_t>(z) * n + i];
  y[i] = sum;
}

__global__ void to_f16_kernel(const float* __restrict__ x, __half* __restrict__ o, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) o[i] = __float2half_rn(x[i]);
}

using gemm_fn = void (*)(const std::uint8_t*, std::size_t, const std::uint8_t*, std::size_t, int, int, const __half*, int, float*, int);

/// How a product is cut: blocks per column of tiles (bm rows each) and parts of k.
struct gemm_shape {
  int bm = 0, splits = 1, split_k = 0;
};

/// 128 activation rows a block, or 64 for a batch of at most 64 rows (batched decode), where a
/// taller tile would multiply zeros. k is split into as many parts as the multiprocessors hold
/// the tiles times over (one block each: the kernel's registers allow no more), each part at least
/// k_min_split_steps steps long.
gemm_shape shape_for(const device_matrix& w, int m) {
  gemm_shape g;
  g.bm = m > 64 ? block_rows<4>() : block_rows<2>();
  const long long tiles = ((w.rows + k_bn - 1) / k_bn) * ((m + g.bm - 1) / g.bm);
  const int steps = static_cast<int>((w.k + k_bk - 1) / k_bk);
  const long long want = multiprocessor_count() / tiles;  // rounded down: a wave, never a second
  g.splits = static_cast<int>(std::max(1LL, std::min<long long>({want, k_max_splits, steps / k_min_split_steps})));
  g.split_k = (steps + g.splits - 1) / g.splits * k_bk;
  g.splits = static_cast<int>((w.k + g.split_k - 1) / g.split_k);  // none empty
  return g;
}

/// The instance for a weight type and tile height, its shared memory allowed once (past the 48 KB
/// default).
template <dtype t, int MI>
gemm_fn instance() {
  static const bool ready = [] {
    check(cudaFuncSetAttribute(gemm_kernel<t, MI>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<MI>()),
          "cudaFuncSetAttribute (gemm)");
    return true;
  }();
  (void)ready;
  return gemm_kernel<t, MI>;
}

template <dtype t>
void launch(const device_matrix& w, const __half* x, int m, float* y, const gemm_shape& g, cudaStream_t stream) {
  const bool tall = g.bm == block_rows<4>();
  const dim3 grid(static_cast<unsigned>((w.rows + k_bn - 1) / k_bn), static_cast<unsigned>((m + g.bm - 1) / g.bm),
                  static_cast<unsigned>(g.splits));
  const gemm_fn f = tall ? instance<t, 4>() : instance<t, 2>();
  f<<<grid, k_threads, tall ? smem_bytes<4>() : smem_bytes<2>(), stream>>>(w.q.as<const std::uint8_t>(), w.q_row_bytes,
                                                                           w.s.as<const std::uint8_t>(), w.s_row_bytes,
                                                                           static_cast<int>(w.rows), static_cast<int>(w.k), x, m, y,
                                                                           g.split_k);
}

}  // namespace

void to_f16(const float* x, void* x16, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  to_f16_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, static_cast<__half*>(x16), n);
  check_launch("to_f16");
}

std::size_t gemm_workspace(const device_matrix& w, int m) {
  if (m <= 0) return 0;
  const gemm_shape g = shape_for(w, m);
  return g.splits > 1 ? static_cast<std::size_t>(g.splits) * m * w.rows * sizeof(float) : 0;
}

void gemm(const device_matrix& w, const void* x16, int m, float* y, cudaStream_t stream, void* workspace,
          std::size_t workspace_bytes) {
  if (m <= 0) return;
  if (w.k % 32 != 0) throw std::invalid_argument("gemm: k must be a multiple of 32");
  gemm_shape g = shape_for(w, m);
  if (g.splits > 1 && workspace_bytes < static_cast<std::size_t>(g.splits) * m * w.rows * sizeof(float)) {
    g.splits = 1;  // no room to split: one part
    g.split_k = static_cast<int>(w.k);
  }
  float* out = g.splits > 1 ? static_cast<float*>(workspace) : y;
  const auto* x = static_cast<const __half*>(x16);
  switch (w.type) {
    case dtype::f16: launch<dtype::f16>(w, x, m, out, g, stream); break;
    case dtype::bf16: launch<dtype::bf16>(w, x, m, out, g, stream); break;
    case dtype::q8_0: launch<dtype::q8_0>(w, x, m, out, g, stream); break;
    case dtype::q4_0: launch<dtype::q4_0>(w, x, m, out, g, stream); break;
    case dtype::q4_1: launch<dtype::q4_1>(w, x, m, out, g, stream); break;
    case dtype::q4_k: launch<dtype::q4_k>(w, x, m, out, g, stream); break;
    case dtype::q5_k: launch<dtype::q5_k>(w, x, m, out, g, stream); break;
    case dtype::q6_k: launch<dtype::q6_k>(w, x, m, out, g, stream); break;
    default: throw std::invalid_argument("gemm: unsupported weight type");
  }
  check_launch("gemm");
  if (g.splits > 1) {
    const long long n = static_cast<long long>(m) * w.rows;
    sum_splits_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(out, g.splits, n, y);
    check_launch("gemm (sum of the splits)");
  }
}

}  // namespace strata::kernels::cuda
