// The prefill GEMM (gemm.hpp). A block of 128 threads computes a 128 x 64 tile of Y (128
// activation rows by 64 weight rows), stepping through k 32 values at a time: the activations'
// tile is copied and the weights' tile dequantized (16 values per thread) into shared memory as
// f16, then each warp multiplies its 64 x 32 part with sixteen m16n8k16 mma.sync per 16 values
// of k. Each dequantized weight serves 128 activation rows. The next step's tiles are read and
// dequantized into registers while the tensor cores work on this one, then stored to the other
// of two shared-memory stages.

#include <cuda_fp16.h>

#include <stdexcept>

#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/mma.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int k_bm = 128, k_bn = 64, k_bk = 32, k_pad = 8;  // pad: rows 80 bytes apart, off the banks' period

__device__ __forceinline__ float h2f(const std::uint8_t* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }

/// Sub-block scale and min j of a q4_K / q5_K super-block (scale_min_k4 in kernels/quants.cpp).
__device__ __forceinline__ void k4_scale_min(const std::uint8_t* sc, int j, float& s, float& m) {
  if (j < 4) {
    s = sc[j] & 63;
    m = sc[j + 4] & 63;
  } else {
    s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
    m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

/// The 16 values [j0, j0 + 16) (j0 a multiple of 16) of one weight row in the device layout.
__device__ void dequant16(dtype t, const std::uint8_t* q, const std::uint8_t* s, int j0, float* v) {
  switch (t) {
    case dtype::f16:
      for (int i = 0; i < 16; ++i) v[i] = h2f(q + 2 * (j0 + i));
      return;
    case dtype::bf16:
      for (int i = 0; i < 16; ++i)
        v[i] = __uint_as_float(static_cast<unsigned>(*reinterpret_cast<const std::uint16_t*>(q + 2 * (j0 + i))) << 16);
      return;
    case dtype::q8_0: {
      const float d = h2f(s + 2 * (j0 / 32));
      for (int i = 0; i < 16; ++i) v[i] = d * static_cast<float>(static_cast<std::int8_t>(q[j0 + i]));
      return;
    }
    case dtype::q4_0: case dtype::q4_1: {
      const int b = j0 / 32, shift = (j0 % 32) / 16 * 4;
      const float d = h2f(s + (t == dtype::q4_0 ? 2 : 4) * b), m = t == dtype::q4_0 ? -8.0f * d : h2f(s + 4 * b + 2);
      for (int i = 0; i < 16; ++i) v[i] = d * static_cast<float>((q[16 * b + i] >> shift) & 0xF) + m;
      return;
    }
    case dtype::q4_k: case dtype::q5_k: {
      const bool five = t == dtype::q5_k;
      const std::uint8_t* b = q + (j0 / 256) * (five ? 176 : 144);
      const int jj = j0 % 256, g = jj / 64, hi = (jj % 64) / 32, l0 = jj % 32;
      float sc, mn;
      k4_scale_min(b + 4, 2 * g + hi, sc, mn);
      const float d = h2f(b) * sc, m = h2f(b + 2) * mn;
      const std::uint8_t* qs = b + (five ? 48 : 16) + 32 * g;
      for (int i = 0; i < 16; ++i) {
        int l = (qs[l0 + i] >> (4 * hi)) & 0xF;
        if (five) l |= ((b[16 + l0 + i] >> (2 * g + hi)) & 1) << 4;
        v[i] = d * static_cast<float>(l) - m;
      }
      return;
    }
    case dtype::q6_k: {
      const std::uint8_t* b = q + (j0 / 256) * 208;
      const int jj = j0 % 256, h = jj / 128, run = (jj % 128) / 32, l0 = jj % 32;
      const float d = h2f(s + 2 * (j0 / 256)) * static_cast<float>(static_cast<std::int8_t>(b[192 + 8 * h + l0 / 16 + 2 * run]));
      const std::uint8_t* ql = b + 64 * h + (run % 2) * 32;
      const std::uint8_t* qh = b + 128 + 32 * h;
      for (int i = 0; i < 16; ++i) {
        const int l = l0 + i;
        const int level = ((ql[l] >> (run / 2 * 4)) & 0xF) | (((qh[l] >> (2 * run)) & 3) << 4);
        v[i] = d * static_cast<float>(level - 32);
      }
      return;
    }
    default:
      for (int i = 0; i < 16; ++i) v[i] = 0.0f;
  }
}

template <dtype t>
__global__ void __launch_bounds__(128)
    gemm_kernel(const std::uint8_t* __restrict__ q, std::size_t q_row, const std::uint8_t* __restrict__ s,
                std::size_t s_row, int rows, int k, const __half* __restrict__ x, int m, float* __restrict__ y) {
  // Two stages: the tensor cores read one while the next step's tiles go to the other.
  __shared__ __align__(16) __half as[2][k_bm][k_bk + k_pad];
  __shared__ __align__(16) __half bs[2][k_bn][k_bk + k_pad];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int m0 = static_cast<int>(blockIdx.y) * k_bm, n0 = static_cast<int>(blockIdx.x) * k_bn;
  const int wm = (warp / 2) * 64, wn = (warp % 2) * 32;  // this warp's 64 x 32 of the tile
  const int g = lane / 4, tg = lane % 4;
  float c[4][4][4] = {};
  // What each thread stages: activation row tid (32 values); weight row tid / 2, half tid % 2.
  // Rows past the end read row 0 (no branch between the loads and the multiplies that should
  // hide them) and stage zeros.
  const int sr = tid / 2, sj = (tid % 2) * 16;
  const bool a_live = m0 + tid < m, b_live = n0 + sr < rows;
  const __half* xa = x + static_cast<std::size_t>(a_live ? m0 + tid : 0) * k;
  const std::uint8_t* qb = q + static_cast<std::size_t>(b_live ? n0 + sr : 0) * q_row;
  const std::uint8_t* sb = s + static_cast<std::size_t>(b_live ? n0 + sr : 0) * s_row;
  uint4 ra[4];
  __half2 rb[8];
  auto fetch = [&](int k0) {
    const uint4* src = reinterpret_cast<const uint4*>(xa + k0);
#pragma unroll
    for (int i = 0; i < 4; ++i) ra[i] = src[i];
    float v[16];
    dequant16(t, qb, sb, k0 + sj, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) rb[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  };
  auto stage = [&](int buf) {
    const uint4 z = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < 4; ++i) *reinterpret_cast<uint4*>(&as[buf][tid][8 * i]) = a_live ? ra[i] : z;
#pragma unroll
    for (int i = 0; i < 8; ++i) *reinterpret_cast<__half2*>(&bs[buf][sr][sj + 2 * i]) = b_live ? rb[i] : __floats2half2_rn(0.0f, 0.0f);
  };
  fetch(0);
  stage(0);
  __syncthreads();
  for (int k0 = 0, buf = 0; k0 < k; k0 += k_bk, buf ^= 1) {
    const bool more = k0 + k_bk < k;
    fetch(more ? k0 + k_bk : k0);  // the last step fetches again what it has: no branch
#pragma unroll
    for (int kk = 0; kk < k_bk; kk += 16) {
      unsigned a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = wm + 16 * i + g;
        a[i][0] = *reinterpret_cast<const unsigned*>(&as[buf][r][kk + 2 * tg]);
        a[i][1] = *reinterpret_cast<const unsigned*>(&as[buf][r + 8][kk + 2 * tg]);
        a[i][2] = *reinterpret_cast<const unsigned*>(&as[buf][r][kk + 2 * tg + 8]);
        a[i][3] = *reinterpret_cast<const unsigned*>(&as[buf][r + 8][kk + 2 * tg + 8]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + 8 * j + g;
        b[j][0] = *reinterpret_cast<const unsigned*>(&bs[buf][n][kk + 2 * tg]);
        b[j][1] = *reinterpret_cast<const unsigned*>(&bs[buf][n][kk + 2 * tg + 8]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) mma16816(c[i][j], a[i], b[j]);
      }
    }
    if (more) stage(buf ^ 1);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
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

__global__ void to_f16_kernel(const float* __restrict__ x, __half* __restrict__ o, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) o[i] = __float2half_rn(x[i]);
}

}  // namespace

void to_f16(const float* x, void* x16, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  to_f16_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, static_cast<__half*>(x16), n);
  check_launch("to_f16");
}

void gemm(const device_matrix& w, const void* x16, int m, float* y, cudaStream_t stream) {
  if (m <= 0) return;
  if (w.k % k_bk != 0) throw std::invalid_argument("gemm: k must be a multiple of 32");
  const dim3 grid(static_cast<unsigned>((w.rows + k_bn - 1) / k_bn), static_cast<unsigned>((m + k_bm - 1) / k_bm));
  const auto* q = w.q.as<const std::uint8_t>();
  const auto* s = w.s.as<const std::uint8_t>();
  const auto* x = static_cast<const __half*>(x16);
  const int rows = static_cast<int>(w.rows), k = static_cast<int>(w.k);
  switch (w.type) {
#define STRATA_GEMM_CASE(T) \
  case T: gemm_kernel<T><<<grid, 128, 0, stream>>>(q, w.q_row_bytes, s, w.s_row_bytes, rows, k, x, m, y); break;
    STRATA_GEMM_CASE(dtype::f16)
    STRATA_GEMM_CASE(dtype::bf16)
    STRATA_GEMM_CASE(dtype::q8_0)
    STRATA_GEMM_CASE(dtype::q4_0)
    STRATA_GEMM_CASE(dtype::q4_1)
    STRATA_GEMM_CASE(dtype::q4_k)
    STRATA_GEMM_CASE(dtype::q5_k)
    STRATA_GEMM_CASE(dtype::q6_k)
#undef STRATA_GEMM_CASE
    default: throw std::invalid_argument("gemm: unsupported weight type");
  }
  check_launch("gemm");
}

}  // namespace strata::kernels::cuda
