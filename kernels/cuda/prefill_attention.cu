// Prefill attention on the tensor cores (prefill_attention.hpp). A block of four warps takes one
// tile of rows and one kv head: its 64 product rows are the tile's rows times the kv head's query
// heads (row-major: product row m is tile row m / group, query head m % group), each warp 16 of
// them. The queries are scaled and kept in shared memory as two f16 parts (split_half2: the value
// rounded and what the rounding left; S takes a product with each), and so are the probabilities
// below: the results are as exact as the decode kernel's f32 ones (one f16 part of each moved a
// small real model's logits past gpu-check's tolerance against the CPU path). K and V tiles of BN
// positions are copied from the pages into two shared-memory stages with cp.async (the next tile
// in flight while this one is used). Per tile, each warp forms S = Q K^T with mma.sync (ldmatrix
// for both operands), masks the positions outside each row's [first, last], updates its running
// max and sum (online softmax, base 2), splits P into two f16 parts in registers (the accumulator
// fragments of S are the A fragments of P V) and adds P V (V through ldmatrix.trans). A warp skips tiles
// past the last position of all its rows (the causal triangle).
//
// Over q8_0 pages the tiles are loaded through registers instead: each value d * q (an f16 scale
// times an int8, exact in f32 as the CPU's rows are) is kept as two f16 parts like the queries,
// in two more stages of K and V, and S and P V take a third product with them (the parts' own
// product, below 2^-22 of the result, is left out).

#include <cuda_fp16.h>

#include <climits>
#include <stdexcept>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/prefill_attention.hpp"

namespace strata::kernels::cuda {
namespace {

constexpr int k_threads = 128, k_bm = 64;  // product rows per block: 16 per warp
constexpr float k_log2e = 1.4426950408889634f;

/// Positions per K/V tile and the shared-memory row pitch (8 halves of padding: 16-byte rows of
/// ldmatrix fall in distinct banks).
template <int HD, bool Q8 = false>
struct shape {
  static constexpr int bn = HD >= 256 ? 32 : 64;
  static constexpr int ld = HD + 8;
  // Q's two parts, then two stages of K and of V (q8_0: and of their second parts).
  static constexpr int smem_bytes = (2 * k_bm + (Q8 ? 8 : 4) * bn) * ld * 2;
};

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int HD, bool Q8>
__global__ void __launch_bounds__(k_threads)
    prefill_kernel(const __half* __restrict__ kp, const __half* __restrict__ vp, int page_tokens, int n_head_kv, decode_rows r,
                   const prefill_tile* __restrict__ tiles, int group) {
  constexpr int BN = shape<HD, Q8>::bn, LD = shape<HD, Q8>::ld, NT = BN / 8, DT = HD / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  __half* qs = reinterpret_cast<__half*>(smem);  // [k_bm][LD]: the queries rounded to f16
  __half* ql = qs + k_bm * LD;                   // [k_bm][LD]: what the rounding left
  __half* ks = ql + k_bm * LD;                   // [2][BN][LD]
  __half* vs = ks + 2 * BN * LD;                 // [2][BN][LD]
  __half* kl = vs + 2 * BN * LD;                 // q8_0: [2][BN][LD], what K's f16 part left
  __half* vl = kl + 2 * BN * LD;                 // q8_0: [2][BN][LD], V's

  const prefill_tile tile = tiles[blockIdx.x];
  const int kvh = static_cast<int>(blockIdx.y), h0 = kvh * group;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, tg = lane % 4;

  // The queries, times the scale, as two f16 parts (rows past the tile: zeros).
  for (int i = tid; i < k_bm * HD / 4; i += k_threads) {
    const int m = i / (HD / 4), d = (i % (HD / 4)) * 4, row = m / group;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < tile.n_rows)
      x = *reinterpret_cast<const float4*>(r.q + (static_cast<std::size_t>(tile.row0 + row) * r.n_head + h0 + m % group) * HD + d);
    unsigned* hi = reinterpret_cast<unsigned*>(qs + m * LD + d);
    unsigned* lo = reinterpret_cast<unsigned*>(ql + m * LD + d);
    split_half2(x.x * r.scale, x.y * r.scale, hi[0], lo[0]);
    split_half2(x.z * r.scale, x.w * r.scale, hi[1], lo[1]);
  }
  // This lane's two product rows (g and g + 8 of its warp's 16) and the positions they attend;
  // rows past the tile attend none.
  int lo[2], hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = (warp * 16 + g + 8 * i) / group;
    lo[i] = row < tile.n_rows ? r.first[tile.row0 + row] : INT_MAX;
    hi[i] = row < tile.n_rows ? r.last[tile.row0 + row] : -1;
  }
  const int w_lo = __reduce_min_sync(0xFFFFFFFFu, min(lo[0], lo[1]));
  const int w_hi = __reduce_max_sync(0xFFFFFFFFu, max(hi[0], hi[1]));
  int kv_lo = INT_MAX, kv_hi = -1;
  for (int i = 0; i < tile.n_rows; ++i) {
    kv_lo = min(kv_lo, r.first[tile.row0 + i]);
    kv_hi = max(kv_hi, r.last[tile.row0 + i]);
  }

  const std::int32_t* blocks = r.blocks + static_cast<std::size_t>(tile.row0) * r.blocks_stride;
  const std::size_t pitch = static_cast<std::size_t>(n_head_kv) * HD;
  // Positions [t0, t0 + BN) of K and V into stage st; positions past kv_hi become zeros (a masked
  // score times a zero value, never times whatever the page holds).
  auto load = [&](int t0, int st) {
    if constexpr (Q8) {
      // A row is n_head_kv * HD / 32 blocks of 34 bytes; 8 values of one block a thread.
      const std::size_t row_bytes = pitch / 32 * 34;
      const auto* k8 = reinterpret_cast<const unsigned char*>(kp);
      const auto* v8 = reinterpret_cast<const unsigned char*>(vp);
      for (int i = tid; i < BN * (HD / 8); i += k_threads) {
        const int j = i / (HD / 8), c = (i % (HD / 8)) * 8, t = t0 + j;
        uint4 khi = make_uint4(0, 0, 0, 0), klo = khi, vhi = khi, vlo = khi;
        if (t <= kv_hi) {
          const std::size_t at = (static_cast<std::size_t>(blocks[t / page_tokens]) * page_tokens + t % page_tokens) * row_bytes +
                                 static_cast<std::size_t>((kvh * HD + c) / 32) * 34;
          const int within = c % 32;
          for (int which = 0; which < 2; ++which) {
            const unsigned char* b = (which == 0 ? k8 : v8) + at;
            // 2-byte aligned (34-byte blocks from an aligned pool): the scale, then 8 int8 as four 16-bit loads.
            const float d = __half2float(*reinterpret_cast<const __half*>(b));
            const auto* q16 = reinterpret_cast<const unsigned short*>(b + 2 + within);
            unsigned hi[4], lo[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const unsigned short u = q16[e];
              split_half2(d * static_cast<float>(static_cast<signed char>(u & 0xFF)), d * static_cast<float>(static_cast<signed char>(u >> 8)),
                          hi[e], lo[e]);
            }
            (which == 0 ? khi : vhi) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
            (which == 0 ? klo : vlo) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
          }
        }
        const int o = (st * BN + j) * LD + c;
        *reinterpret_cast<uint4*>(ks + o) = khi;
        *reinterpret_cast<uint4*>(kl + o) = klo;
        *reinterpret_cast<uint4*>(vs + o) = vhi;
        *reinterpret_cast<uint4*>(vl + o) = vlo;
      }
    } else {
      for (int i = tid; i < BN * (HD / 8); i += k_threads) {
        const int j = i / (HD / 8), c = (i % (HD / 8)) * 8, t = t0 + j;
        const bool live = t <= kv_hi;
        std::size_t at = 0;
        if (live) at = (static_cast<std::size_t>(blocks[t / page_tokens]) * page_tokens + t % page_tokens) * pitch + kvh * HD + c;
        cp_async16(ks + (st * BN + j) * LD + c, kp + at, live);
        cp_async16(vs + (st * BN + j) * LD + c, vp + at, live);
      }
    }
    cp_async_commit();
  };

  float o[DT][4];
#pragma unroll
  for (int d = 0; d < DT; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
  const int n_tiles = kv_hi >= kv_lo ? (kv_hi - kv_lo) / BN + 1 : 0;
  if (n_tiles > 0) load(kv_lo, 0);
  const int li = lane / 8, lj = lane % 8;  // ldmatrix: this lane's matrix and row
  for (int it = 0; it < n_tiles; ++it) {
    const int t0 = kv_lo + it * BN, st = it & 1;
    if (it + 1 < n_tiles) {
      load(t0 + BN, st ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (t0 <= w_hi && t0 + BN - 1 >= w_lo) {
      // S = Q K^T for this warp's 16 rows and the tile's BN positions.
      float s[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < HD / 16; ++kc) {
        unsigned qh[4], qr[4];  // the query's two parts
        const int at = (warp * 16 + lj + 8 * (li % 2)) * LD + kc * 16 + 8 * (li / 2);
        ldmatrix_x4(qh, qs + at);
        ldmatrix_x4(qr, ql + at);
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          unsigned b[4];
          ldmatrix_x4(b, ks + (st * BN + n * 8 + 8 * (li / 2) + lj) * LD + kc * 16 + 8 * (li % 2));
          mma16816(s[n], qh, b);
          mma16816(s[n + 1], qh, b + 2);
          mma16816(s[n], qr, b);
          mma16816(s[n + 1], qr, b + 2);
          if constexpr (Q8) {
            ldmatrix_x4(b, kl + (st * BN + n * 8 + 8 * (li / 2) + lj) * LD + kc * 16 + 8 * (li % 2));
            mma16816(s[n], qh, b);
            mma16816(s[n + 1], qh, b + 2);
          }
        }
      }
      // Mask, then the online softmax in base 2, per product row (a row's 4 lanes share it).
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float m_new = mx[i];
#pragma unroll
        for (int n = 0; n < NT; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int t = t0 + n * 8 + 2 * tg + e;
            float x = s[n][2 * i + e];
            if (r.softcap > 0.0f) x = r.softcap * tanhf(x / r.softcap);
            x = t >= lo[i] && t <= hi[i] ? x * k_log2e : -INFINITY;
            s[n][2 * i + e] = x;
            m_new = fmaxf(m_new, x);
          }
        }
        m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 1));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xFFFFFFFFu, m_new, 2));
        const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with no position yet
        const float c = ex2(mx[i] - base);
        mx[i] = m_new;
        sum[i] *= c;
#pragma unroll
        for (int d = 0; d < DT; ++d) {
          o[d][2 * i] *= c;
          o[d][2 * i + 1] *= c;
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = ex2(s[n][2 * i + e] - base);
            s[n][2 * i + e] = p;
            sum[i] += p;
          }
        }
      }
      // O += P V, 16 positions at a time: S's fragments of two n-tiles are P's A fragment.
#pragma unroll
      for (int kc = 0; kc < BN / 16; ++kc) {
        unsigned ph[4], pr[4];  // P's two parts
        split_half2(s[2 * kc][0], s[2 * kc][1], ph[0], pr[0]);
        split_half2(s[2 * kc][2], s[2 * kc][3], ph[1], pr[1]);
        split_half2(s[2 * kc + 1][0], s[2 * kc + 1][1], ph[2], pr[2]);
        split_half2(s[2 * kc + 1][2], s[2 * kc + 1][3], ph[3], pr[3]);
#pragma unroll
        for (int d = 0; d < DT; d += 2) {
          unsigned b[4];
          ldmatrix_x4_trans(b, vs + (st * BN + kc * 16 + lj + 8 * (li % 2)) * LD + d * 8 + 8 * (li / 2));
          mma16816(o[d], ph, b);
          mma16816(o[d + 1], ph, b + 2);
          mma16816(o[d], pr, b);
          mma16816(o[d + 1], pr, b + 2);
          if constexpr (Q8) {
            ldmatrix_x4_trans(b, vl + (st * BN + kc * 16 + lj + 8 * (li % 2)) * LD + d * 8 + 8 * (li / 2));
            mma16816(o[d], ph, b);
            mma16816(o[d + 1], ph, b + 2);
          }
        }
      }
    }
    __syncthreads();  // the stage is refilled next trip
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sum[i] += __shfl_xor_sync(0xFFFFFFFFu, sum[i], 1);
    sum[i] += __shfl_xor_sync(0xFFFFFFFFu, sum[i], 2);
    const int m = warp * 16 + g + 8 * i, row = m / group;
    if (row >= tile.n_rows) continue;
    const float inv = sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f;
    float* out = r.out + (static_cast<std::size_t>(tile.row0 + row) * r.n_head + h0 + m % group) * HD + 2 * tg;
#pragma unroll
    for (int d = 0; d < DT; ++d) *reinterpret_cast<float2*>(out + d * 8) = make_float2(o[d][2 * i] * inv, o[d][2 * i + 1] * inv);
  }
}

using kernel_fn = void (*)(const __half*, const __half*, int, int, decode_rows, const prefill_tile*, int);

/// The instance for a head size and page format, its shared memory allowed once (past the 48 KB
/// default).
template <int HD, bool Q8>
kernel_fn instance() {
  static const bool ready = [] {
    check(cudaFuncSetAttribute(prefill_kernel<HD, Q8>, cudaFuncAttributeMaxDynamicSharedMemorySize, shape<HD, Q8>::smem_bytes),
          "cudaFuncSetAttribute (prefill_attention)");
    return true;
  }();
  (void)ready;
  return prefill_kernel<HD, Q8>;
}

}  // namespace

int prefill_tile_rows(int n_head, int n_head_kv, int head_dim) {
  if (n_head_kv <= 0 || n_head % n_head_kv != 0) return 0;
  if (head_dim != 32 && head_dim != 64 && head_dim != 128 && head_dim != 256) return 0;
  const int group = n_head / n_head_kv;
  return group > k_bm ? 0 : k_bm / group;
}

void prefill_attention(const kv_pages_f16& kv, const decode_rows& r, const prefill_tile* tiles, int n_tiles, cudaStream_t stream) {
  if (kv.bits != 16 && kv.bits != 8) throw std::invalid_argument("prefill_attention: pages of 16 (f16) or 8 (q8_0) bits");
  if (n_tiles <= 0) return;
  if (prefill_tile_rows(r.n_head, kv.n_head_kv, kv.head_dim) == 0)
    throw std::invalid_argument("prefill_attention: this head grouping or head size is not taken");
  const int group = r.n_head / kv.n_head_kv;
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(kv.n_head_kv));
  const auto* k = static_cast<const __half*>(kv.k);
  const auto* v = static_cast<const __half*>(kv.v);
  switch (kv.head_dim) {
#define STRATA_PREFILL_CASE(HD)                                                                                           \
  case HD:                                                                                                                \
    if (kv.bits == 8)                                                                                                     \
      instance<HD, true>()<<<grid, k_threads, shape<HD, true>::smem_bytes, stream>>>(k, v, kv.page_tokens, kv.n_head_kv, r, tiles, group); \
    else                                                                                                                  \
      instance<HD, false>()<<<grid, k_threads, shape<HD, false>::smem_bytes, stream>>>(k, v, kv.page_tokens, kv.n_head_kv, r, tiles, group); \
    break;
    STRATA_PREFILL_CASE(32)
    STRATA_PREFILL_CASE(64)
    STRATA_PREFILL_CASE(128)
    STRATA_PREFILL_CASE(256)
#undef STRATA_PREFILL_CASE
  }
  check_launch("prefill_attention");
}

}  // namespace strata::kernels::cuda
