// Paged decode attention (attention.hpp). A block takes one kv head, up to 8 of its query heads
// and one part of a row's positions. Its 128 threads form S independent streams of HD / 8 lanes;
// a stream walks every S-th position of the part, each lane loading 16 bytes (8 dims) of the
// position's K and V row, keeping an online softmax (running max, sum, weighted V) per query
// head. Where a launch fills the device at least twice, a stream loads its next trip's K and V
// before it computes the current one (PF). The streams are merged by log-sum-exp at the end, then
// the parts of a row by merge_kernel.
// Over q8_0 pages a lane's 8 dims are 8 int8 of one 34-byte block and the block's f16 scale. With
// heads of 64 values or more every head starts 4-byte aligned (a pair of blocks is 68 bytes), so a
// lane reads the two or three aligned 32-bit words that hold its 8 levels and shifts them into place
// (heads of 32: four 16-bit loads); the levels become floats exactly by a byte permute into the
// mantissa of 2^23 and one add (no int-to-float conversion, a reduced-throughput instruction),
// and the block's scale multiplies a lane's partial score and its softmax weight once, not
// each value. A q8_0 stream has four positions in flight a trip (f16: two; its loads are 10
// bytes a lane, not 16). STRATA_CUDA_ATTENTION_Q8=narrow takes the first q8_0 kernel (16-bit
// loads, each value converted and scaled), =2 two positions a trip, for comparison.

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_block.cuh"
#include "kernels/cuda/device.hpp"

namespace strata::kernels::cuda {
namespace {

constexpr int k_threads = 128;
constexpr int k_heads_per_block = 8;
constexpr int k_unroll = 2;  // positions in flight per stream (fewer registers, more blocks per SM)

/// The pages' format as the kernel reads them: f16; q8_0 by 16-bit loads, each value converted and
/// scaled (the first q8_0 kernel, kept for comparison); q8_0 by aligned words, scaled per block.
enum : int { k_f16 = 0, k_q8_narrow = 1, k_q8 = 2 };

struct launch_shape {
  int group = 1;   // query heads per kv head
  int chunks = 1;  // blocks per kv head: ceil(group / k_heads_per_block)
  int splits = 1;
  int per_split = 0;  // positions per part
};

__device__ __forceinline__ void f16x8(const uint4& w, float* f) {
  const __half2* h = reinterpret_cast<const __half2*>(&w);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __half22float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

// The pages, block table and parts are read with ordinary loads (__ldca), never __ldg: the kernel
// before may still be writing them when this one starts (pdl.cuh).

/// A lane's 8 int8 of a q8_0 block (at byte `within` of its 32 values) in x and y, the block's f16
/// scale in z.
__device__ __forceinline__ uint4 load_q8(const unsigned char* block, int within) {
  const unsigned short* p = reinterpret_cast<const unsigned short*>(block);
  const int i = 1 + within / 2;
  uint4 u;
  u.x = __ldca(p + i) | (static_cast<unsigned>(__ldca(p + i + 1)) << 16);
  u.y = __ldca(p + i + 2) | (static_cast<unsigned>(__ldca(p + i + 3)) << 16);
  u.z = __ldca(p);
  u.w = 0;
  return u;
}

/// A lane's q8_0 unit for k_q8: x, y and z the aligned words from 2 bytes before (`shift` 2) or at
/// (`shift` 0) its 8 levels (z only with shift 2: levels that start 2 bytes into a word end 2
/// bytes into the third), w the block's f16 scale. Heads of 32 values (2-byte aligned) take
/// load_q8's four 16-bit loads, with shift 0.
template <int HD>
__device__ __forceinline__ uint4 load_q8_words(const unsigned char* block, int within, int shift) {
  if constexpr (HD < 64) {
    const uint4 u = load_q8(block, within);
    return make_uint4(u.x, u.y, 0u, u.z);
  } else {
    const unsigned* w = reinterpret_cast<const unsigned*>(block + 2 + within - shift);
    uint4 u;
    u.x = __ldca(w);
    u.y = __ldca(w + 1);
    u.z = shift ? __ldca(w + 2) : 0u;
    u.w = __ldca(reinterpret_cast<const unsigned short*>(block));
    return u;
  }
}

/// The 8 int8 levels in lo and hi as floats, exactly: each byte offset by 128 (the xor) is placed as
/// the low mantissa bits of 2^23 (0x4B000000) by a byte permute, and 2^23 + 128 taken off.
__device__ __forceinline__ void levels_f32(unsigned lo, unsigned hi, float* f) {
  lo ^= 0x80808080u;
  hi ^= 0x80808080u;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[e] = __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7440u | static_cast<unsigned>(e))) - 8388736.0f;
    f[4 + e] = __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7440u | static_cast<unsigned>(e))) - 8388736.0f;
  }
}

/// The 8 levels of a load_q8_words unit as floats (levels_f32), and the block's scale in d.
__device__ __forceinline__ void q8_levels(const uint4& u, int shift, float* f, float& d) {
  levels_f32(__funnelshift_r(u.x, u.y, 8 * shift), __funnelshift_r(u.y, u.z, 8 * shift), f);
  d = __half2float(__ushort_as_half(static_cast<unsigned short>(u.w)));
}

/// The 8 values of a lane's 16-byte f16 unit, or of its load_q8 unit.
template <bool Q8>
__device__ __forceinline__ void unit_to_f32(const uint4& w, float* f) {
  if constexpr (Q8) {
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(w.z)));
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      f[e] = d * static_cast<float>(static_cast<signed char>((w.x >> (8 * e)) & 0xFFu));
      f[4 + e] = d * static_cast<float>(static_cast<signed char>((w.y >> (8 * e)) & 0xFFu));
    }
  } else {
    f16x8(w, f);
  }
}

template <int HD, int G, int F, bool PF, int U>
__global__ void __launch_bounds__(k_threads)
    decode_kernel(const __half* __restrict__ kp, const __half* __restrict__ vp, int page_tokens, int n_head_kv, decode_rows r,
                  launch_shape ls, float* __restrict__ part_out, float* __restrict__ part_lse) {
  pdl_launch_dependents();
  pdl_wait();
  constexpr int L = HD / 8, P = 32 / L, S = (k_threads / 32) * P;
  constexpr bool Q8 = F != k_f16;
  const int z = static_cast<int>(blockIdx.z), seq = r.rows ? r.rows[z] : z, split = static_cast<int>(blockIdx.y);
  const int kvh = static_cast<int>(blockIdx.x) / ls.chunks, chunk = static_cast<int>(blockIdx.x) % ls.chunks;
  const int h0 = kvh * ls.group + chunk * k_heads_per_block;
  const int nh = min(G, ls.group - chunk * k_heads_per_block);
  const int lane = static_cast<int>(threadIdx.x % 32), sid = static_cast<int>(threadIdx.x / 32) * P + lane / L, sub = lane % L;

  float q[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      q[g][e] = g < nh ? r.q[(static_cast<std::size_t>(seq) * r.n_head + h0 + g) * HD + sub * 8 + e] : 0.0f;
  }
  float m[G], l[G], acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
  }

  const int t_lo = max(r.first[seq], split * ls.per_split);
  const int t_hi = min(r.last[seq], (split + 1) * ls.per_split - 1);
  const std::int32_t* blocks = r.blocks + static_cast<std::size_t>(seq) * r.blocks_stride;
  const std::size_t row = static_cast<std::size_t>(n_head_kv) * HD;
  const std::size_t col = static_cast<std::size_t>(kvh) * HD + sub * 8;
  // q8_0: a row's bytes, and the byte of the lane's block within it.
  const std::size_t row_q8 = row / 32 * 34, block_q8 = col / 32 * 34;
  const int within = static_cast<int>(col % 32);
  // k_q8: the lane's levels start 2 bytes into a 32-bit word in an even block of the row (rows and
  // heads hold even numbers of blocks from 64 values on), at a word in an odd one.
  const int shift = HD >= 64 && (col / 32) % 2 == 0 ? 2 : 0;
  // Every lane of a warp takes the same trips (the score sums shuffle across lanes); positions
  // past the part's end are masked. With PF the next trip's K and V are loaded before this
  // trip's products, so each warp has a trip's loads in flight while it computes; without, each
  // trip loads its own (fewer registers: short rows, whose launches leave the device half empty).
  auto load = [&](int tb, uint4 (&kr)[U], uint4 (&vr)[U]) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int t = tb + sid + j * S;
      kr[j] = make_uint4(0, 0, 0, 0);
      vr[j] = make_uint4(0, 0, 0, 0);
      if (t <= t_hi) {
        const std::size_t page = static_cast<std::size_t>(__ldca(blocks + t / page_tokens));
        const std::size_t slot = page * page_tokens + t % page_tokens;
        if constexpr (F == k_q8) {
          const std::size_t at = slot * row_q8 + block_q8;
          kr[j] = load_q8_words<HD>(reinterpret_cast<const unsigned char*>(kp) + at, within, shift);
          vr[j] = load_q8_words<HD>(reinterpret_cast<const unsigned char*>(vp) + at, within, shift);
        } else if constexpr (Q8) {
          const std::size_t at = slot * row_q8 + block_q8;
          kr[j] = load_q8(reinterpret_cast<const unsigned char*>(kp) + at, within);
          vr[j] = load_q8(reinterpret_cast<const unsigned char*>(vp) + at, within);
        } else {
          const std::size_t at = slot * row + col;
          kr[j] = __ldca(reinterpret_cast<const uint4*>(kp + at));
          vr[j] = __ldca(reinterpret_cast<const uint4*>(vp + at));
        }
      }
    }
  };
  uint4 kn[U], vn[U];
  if constexpr (PF) load(t_lo, kn, vn);
  for (int tb = t_lo; tb <= t_hi; tb += S * U) {
    const int t0 = tb + sid;
    uint4 kr[U], vr[U];
    if constexpr (PF) {
#pragma unroll
      for (int j = 0; j < U; ++j) {
        kr[j] = kn[j];
        vr[j] = vn[j];
      }
      if (tb + S * U <= t_hi) load(tb + S * U, kn, vn);
    } else {
      load(tb, kr, vr);
    }
    float s[G][U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      float kf[8];
      // k_q8: the levels, and the block's scale with the score's (once a lane, not once a value).
      float pre = 1.0f, post = r.scale;
      if constexpr (F == k_q8) {
        q8_levels(kr[j], shift, kf, pre);
        pre *= r.scale;
        post = 1.0f;
      } else {
        unit_to_f32<Q8>(kr[j], kf);
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d += q[g][e] * kf[e];
        if constexpr (F == k_q8) d *= pre;
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xFFFFFFFFu, d, o);
        if constexpr (F != k_q8) d *= post;
        if (r.softcap > 0.0f) d = r.softcap * tanhf(d / r.softcap);
        s[g][j] = t0 + j * S <= t_hi ? d : -INFINITY;
      }
    }
    // k_q8: V's levels, and the block's scale, which multiplies each weight once.
    float vf[U][8], vd[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      vd[j] = 1.0f;
      if (t0 + j * S <= t_hi) {
        if constexpr (F == k_q8) q8_levels(vr[j], shift, vf[j], vd[j]);
        else unit_to_f32<Q8>(vr[j], vf[j]);
      } else {
        vd[j] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) vf[j][e] = 0.0f;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = m[g];
#pragma unroll
      for (int j = 0; j < U; ++j) mx = fmaxf(mx, s[g][j]);
      if (mx == -INFINITY) continue;      // no position of this stream yet
      const float c = __expf(m[g] - mx);  // 0 while m is -inf
      l[g] *= c;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= c;
#pragma unroll
      for (int j = 0; j < U; ++j) {
        const float p = __expf(s[g][j] - mx);
        l[g] += p;
        const float w = F == k_q8 ? p * vd[j] : p;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += w * vf[j][e];
      }
      m[g] = mx;
    }
  }

  // Merge the S streams.
  __shared__ float sm_m[S][G], sm_l[S][G];
  __shared__ float sm_acc[S][G][HD];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (sub == 0) {
      sm_m[sid][g] = m[g];
      sm_l[sid][g] = l[g];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) sm_acc[sid][g][sub * 8 + e] = acc[g][e];
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < nh * HD; i += k_threads) {
    const int g = i / HD, d = i % HD;
    float mx = -INFINITY;
    for (int k = 0; k < S; ++k) mx = fmaxf(mx, sm_m[k][g]);
    float total = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
      for (int k = 0; k < S; ++k) {
        const float w = __expf(sm_m[k][g] - mx);
        total += w * sm_l[k][g];
        o += w * sm_acc[k][g][d];
      }
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const int h = h0 + g;
    if (ls.splits == 1) {
      // A warp holds 32 consecutive values of one head here (HD is a multiple of 32): one block
      // of the rounding.
      const std::size_t at = (static_cast<std::size_t>(seq) * r.n_head + h) * HD + d;
      r.out[at] = o * inv;
      if (r.out_q) quantize_block(o * inv, lane, r.out_q + (at - lane), r.out_ds + at / 32);
    } else {
      const std::size_t part = (static_cast<std::size_t>(z) * ls.splits + split) * r.n_head + h;
      part_out[part * HD + d] = o * inv;
      if (d == 0) part_lse[part] = total > 0.0f ? mx + logf(total) : -INFINITY;
    }
  }
}

constexpr int k_merge_threads = 128;

/// out of row seq (rows[z] when given), head h: the parts merged by their log-sum-exps
/// (merge_attention). Each warp computes the parts' weights exp(lse_i - max) once into shared
/// memory (no block barrier: a warp's dims need only its own copy), then each lane adds its dims
/// over the parts with several loads in flight.
__global__ void __launch_bounds__(k_merge_threads)
    merge_kernel(const float* part_out, const float* part_lse, int splits, int n_head, int hd,
                 const std::int32_t* rows, float* __restrict__ out, std::int8_t* __restrict__ out_q,
                 float2* __restrict__ out_ds) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float weight[k_merge_threads / 32][k_attention_max_splits];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int z = static_cast<int>(blockIdx.x) / n_head, h = static_cast<int>(blockIdx.x) % n_head;
  const int seq = rows ? rows[z] : z;
  const std::size_t base = static_cast<std::size_t>(z) * splits * n_head + h;
  float mx = -INFINITY;
  for (int i = lane; i < splits; i += 32) mx = fmaxf(mx, part_lse[base + static_cast<std::size_t>(i) * n_head]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o));
  float total = 0.0f;
  for (int i = lane; i < splits; i += 32) {
    const float w = mx == -INFINITY ? 0.0f : __expf(part_lse[base + static_cast<std::size_t>(i) * n_head] - mx);
    weight[warp][i] = w;
    total += w;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xFFFFFFFFu, total, o);
  __syncwarp();
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const float* w = weight[warp];
  const std::size_t step = static_cast<std::size_t>(n_head) * hd;
  for (int d = tid; d < hd; d += k_merge_threads) {
    const float* po = part_out + base * hd + d;
    float o = 0.0f;
#pragma unroll 8
    for (int i = 0; i < splits; ++i) o += w[i] * po[static_cast<std::size_t>(i) * step];
    const std::size_t at = (static_cast<std::size_t>(seq) * n_head + h) * hd + d;
    const float y = o * inv;
    out[at] = y;
    // hd is a multiple of 32 and the block's threads too: whole warps, one rounding block each.
    if (out_q) quantize_block(y, lane, out_q + (at - lane), out_ds + at / 32);
  }
}

/// The first merge, for comparison (STRATA_CUDA_ATTENTION_MERGE=loop): each thread walks the
/// parts one after another, an exp and two loads each.
__global__ void merge_loop_kernel(const float* part_out, const float* part_lse, int splits, int n_head,
                                  int hd, const std::int32_t* rows, float* __restrict__ out,
                                  std::int8_t* __restrict__ out_q, float2* __restrict__ out_ds) {
  pdl_launch_dependents();
  pdl_wait();
  const int z = static_cast<int>(blockIdx.x) / n_head, h = static_cast<int>(blockIdx.x) % n_head;
  const int seq = rows ? rows[z] : z;
  const std::size_t base = static_cast<std::size_t>(z) * splits * n_head + h;
  float mx = -INFINITY;
  for (int i = 0; i < splits; ++i) mx = fmaxf(mx, part_lse[base + static_cast<std::size_t>(i) * n_head]);
  for (int d = static_cast<int>(threadIdx.x); d < hd; d += blockDim.x) {
    float total = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
      for (int i = 0; i < splits; ++i) {
        const std::size_t p = base + static_cast<std::size_t>(i) * n_head;
        const float w = __expf(part_lse[p] - mx);
        total += w;
        o += w * part_out[p * hd + d];
      }
    }
    const std::size_t at = (static_cast<std::size_t>(seq) * n_head + h) * hd + d;
    const float y = total > 0.0f ? o / total : 0.0f;
    out[at] = y;
    if (out_q) quantize_block(y, static_cast<int>(threadIdx.x % 32), out_q + (at - threadIdx.x % 32), out_ds + at / 32);
  }
}

/// Whether a launch of `blocks` blocks takes the kernel that loads a trip ahead. Measured on the
/// H100 (kernels/cuda/NOTES.md), one row: it wins where the blocks fill the device at least twice
/// over (4k positions, 512 blocks: 18.6 -> 17.0 us; 16k 40.3 -> 36.1; 64 rows of 1k 117.5 ->
/// 103.6) and loses with a block or less per multiprocessor (1k in 16 parts, 128 blocks: 10.2 ->
/// 12.3). STRATA_CUDA_ATTENTION_PREFETCH=0 or 1 takes one kernel always, for comparison; and
/// STRATA_CUDA_ATTENTION_MERGE=loop the first merge.
bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}
bool attention_prefetch(long long blocks) {
  static const int forced = env_is("STRATA_CUDA_ATTENTION_PREFETCH", "0") ? 0 : env_is("STRATA_CUDA_ATTENTION_PREFETCH", "1") ? 1 : -1;
  if (forced >= 0) return forced == 1;
  return blocks >= 2LL * multiprocessor_count();
}
bool merge_loop() {
  static const bool on = env_is("STRATA_CUDA_ATTENTION_MERGE", "loop");
  return on;
}
/// The q8_0 kernel (STRATA_CUDA_ATTENTION_Q8): 0 k_q8 with four positions a stream in flight (up
/// to 4 query heads a kv head; 8 take two: four would spill), for comparison 2 with two ("2") and
/// 1 the first kernel ("narrow").
int q8_choice() {
  static const int c = env_is("STRATA_CUDA_ATTENTION_Q8", "narrow") ? 1 : env_is("STRATA_CUDA_ATTENTION_Q8", "2") ? 2 : 0;
  return c;
}

using kernel_fn = void (*)(const __half*, const __half*, int, int, decode_rows, launch_shape, float*, float*);

template <int HD, int F, bool PF, int U>
kernel_fn kernel_for_group(int group) {
  const int g = std::min(group, k_heads_per_block);
  if (g == 1) return decode_kernel<HD, 1, F, PF, U>;
  if (g == 2) return decode_kernel<HD, 2, F, PF, U>;
  if (g <= 4) return decode_kernel<HD, 4, F, PF, U>;
  return decode_kernel<HD, 8, F, PF, std::min(U, k_unroll)>;  // 8 heads of 4 positions spill
}

template <int F, bool PF, int U = k_unroll>
kernel_fn kernel_for_dim(int head_dim, int group) {
  switch (head_dim) {
    case 32: return kernel_for_group<32, F, PF, U>(group);
    case 64: return kernel_for_group<64, F, PF, U>(group);
    case 128: return kernel_for_group<128, F, PF, U>(group);
    case 256: return kernel_for_group<256, F, PF, U>(group);
    default: throw std::invalid_argument("decode_attention: head_dim must be 32, 64, 128 or 256");
  }
}

/// The kernel instance for the pages' format, a head size and query heads per kv head (padded to
/// 1, 2, 4 or 8).
kernel_fn kernel_for(const kv_pages_f16& kv, int group, bool pf) {
  if (kv.bits != 8 && kv.bits != 16) throw std::invalid_argument("decode_attention: pages of 16 (f16) or 8 (q8_0) bits");
  if (kv.bits == 8) {
    switch (q8_choice()) {
      case 1:
        return pf ? kernel_for_dim<k_q8_narrow, true>(kv.head_dim, group) : kernel_for_dim<k_q8_narrow, false>(kv.head_dim, group);
      case 2: return pf ? kernel_for_dim<k_q8, true>(kv.head_dim, group) : kernel_for_dim<k_q8, false>(kv.head_dim, group);
      default: return pf ? kernel_for_dim<k_q8, true, 4>(kv.head_dim, group) : kernel_for_dim<k_q8, false, 4>(kv.head_dim, group);
    }
  }
  return pf ? kernel_for_dim<k_f16, true>(kv.head_dim, group) : kernel_for_dim<k_f16, false>(kv.head_dim, group);
}

/// Blocks of f resident per multiprocessor, asked of the runtime once per kernel (each decode
/// step of every layer needs it twice, and the query costs as much as a launch).
int resident_blocks(kernel_fn f) {
  static std::mutex mu;
  static std::vector<std::pair<kernel_fn, int>> known;
  std::lock_guard lock(mu);
  for (const auto& [g, n] : known)
    if (g == f) return n;
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, k_threads, 0), "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  known.emplace_back(f, per_sm);
  return per_sm;
}

launch_shape shape_for(const kv_pages_f16& kv, const decode_rows& r) {
  if (kv.n_head_kv <= 0 || r.n_head % kv.n_head_kv != 0 || kv.page_tokens <= 0)
    throw std::invalid_argument("decode_attention: n_head must be a multiple of n_head_kv");
  launch_shape ls;
  ls.group = r.n_head / kv.n_head_kv;
  ls.chunks = (ls.group + k_heads_per_block - 1) / k_heads_per_block;
  // Split the rows into as many parts as fit on the device at once (the blocks resident per
  // multiprocessor, whose loads in flight cover the memory latency), never past one wave, each
  // part at least k_attention_min_split positions long (or, for a short row, up to
  // k_attention_short_parts parts of at least k_attention_min_short_split).
  const int per_sm = resident_blocks(kernel_for(kv, ls.group, true));  // the more registers of the two
  const long long blocks = std::max(1LL, static_cast<long long>(r.n_seq) * kv.n_head_kv * ls.chunks);  // n_seq may be 0
  const long long want = static_cast<long long>(std::max(per_sm, 1)) * multiprocessor_count() / blocks;
  const long long most = std::max<long long>((r.max_positions + k_attention_min_split - 1) / k_attention_min_split,
                                  std::min<long long>(k_attention_short_parts,
                                                      (r.max_positions + k_attention_min_short_split - 1) / k_attention_min_short_split));
  const long long asked = r.splits > 0 ? r.splits : want;
  ls.splits = static_cast<int>(std::max(1LL, std::min({asked, most, static_cast<long long>(k_attention_max_splits)})));
  ls.per_split = (r.max_positions + ls.splits - 1) / ls.splits;
  return ls;
}

}  // namespace

int decode_attention_splits(const kv_pages_f16& kv, const decode_rows& r) { return shape_for(kv, r).splits; }

std::size_t decode_attention_workspace(const kv_pages_f16& kv, const decode_rows& r) {
  const launch_shape ls = shape_for(kv, r);
  if (ls.splits == 1) return 0;
  return static_cast<std::size_t>(r.n_seq) * ls.splits * r.n_head * (kv.head_dim + 1) * sizeof(float);
}

void decode_attention(const kv_pages_f16& kv, const decode_rows& r, void* workspace, std::size_t workspace_bytes,
                      cudaStream_t stream) {
  if (r.n_seq <= 0 || r.max_positions <= 0) return;
  const launch_shape ls = shape_for(kv, r);
  float* po = nullptr;
  float* pl = nullptr;
  if (ls.splits > 1) {
    if (workspace_bytes < decode_attention_workspace(kv, r)) throw std::invalid_argument("decode_attention: workspace too small");
    po = static_cast<float*>(workspace);
    pl = po + static_cast<std::size_t>(r.n_seq) * ls.splits * r.n_head * kv.head_dim;
  }
  const dim3 grid(static_cast<unsigned>(kv.n_head_kv * ls.chunks), static_cast<unsigned>(ls.splits), static_cast<unsigned>(r.n_seq));
  const bool pf = attention_prefetch(static_cast<long long>(grid.x) * grid.y * grid.z);
  launch_pdl("decode_attention", kernel_for(kv, ls.group, pf), grid, k_threads, 0, stream, static_cast<const __half*>(kv.k),
             static_cast<const __half*>(kv.v), kv.page_tokens, kv.n_head_kv, r, ls, po, pl);
  if (ls.splits > 1) {
    launch_pdl("decode_attention (merge)", merge_loop() ? merge_loop_kernel : merge_kernel, r.n_seq * r.n_head, k_merge_threads,
               0, stream, static_cast<const float*>(po), static_cast<const float*>(pl), ls.splits, r.n_head, kv.head_dim, r.rows,
               r.out, r.out_q, r.out_ds);
  }
}

}  // namespace strata::kernels::cuda
