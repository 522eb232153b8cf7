// The decode matrix-vector kernels: one warp per weight row, each lane reading 16-byte pieces of
// the row (a "unit": a q4_0 block, half a q4_K group pair, ...), several units in flight before
// the first is used, dequantized in registers and dotted with the activations (f32 for the float
// types, 8-bit with dp4a for the rest). Layouts: matvec.hpp.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/matvec.hpp"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_block.cuh"

namespace strata::kernels::cuda {
namespace {

constexpr int k_warps = 4;  // rows per block: one warp each
constexpr unsigned k_lo = 0x0F0F0F0Fu;

__device__ __forceinline__ uint4 ld16(const std::uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
// Activations (x, xq, xds) are written by the kernel before, which may still run when this one
// starts (pdl.cuh): they are read with ld.global.ca (__ldca), not ld.global.nc (__ldg), whose data
// must not change while the kernel lives. With __ldg here, pool hits got other bits run to run
// (kernels/cuda/NOTES.md). Weights never change: __ldg.
__device__ __forceinline__ int4 ldx16(const std::int8_t* p) { return __ldca(reinterpret_cast<const int4*>(p)); }
__device__ __forceinline__ float ldh(const std::uint8_t* p) { return __half2float(__ldg(reinterpret_cast<const __half*>(p))); }
__device__ __forceinline__ float half_bits(unsigned bits) { return __half2float(__ushort_as_half(static_cast<unsigned short>(bits))); }

/// s += the four byte products of the low nibbles of w with xl, and of the high ones with xh.
__device__ __forceinline__ int dot_nibbles(unsigned w, int xl, int xh, int s) {
  s = __dp4a(static_cast<int>(w & k_lo), xl, s);
  return __dp4a(static_cast<int>((w >> 4) & k_lo), xh, s);
}

/// Four 6-bit levels (bytes of 0..63) minus 32, as signed bytes.
__device__ __forceinline__ int minus32(unsigned v) {
  const unsigned r = v ^ 0x20202020u, t = r & 0x20202020u;
  return static_cast<int>(r | (t << 1) | (t << 2));
}

/// Sub-block scale and min j (0..7) of a q4_K / q5_K super-block whose 12 scale bytes are the
/// words y, z, w (bytes 0..3, 4..7, 8..11), as scale_min_k4 in kernels/quants.cpp.
__device__ __forceinline__ void scale_min(int j, unsigned y, unsigned z, unsigned w, int& sc, int& m) {
  if (j < 4) {
    sc = (y >> (8 * j)) & 63;
    m = (z >> (8 * j)) & 63;
  } else {
    const int i = 8 * (j - 4);
    sc = ((w >> i) & 0xF) | (((y >> i) >> 6 & 3) << 4);
    m = ((w >> i) >> 4 & 0xF) | (((z >> i) >> 6 & 3) << 4);
  }
}

// Each weight type: `values` per unit, `unroll` units in flight per lane, float_x (f32
// activations) or not, the registers of a unit, load (weights only) and dot (with one row of x).

struct f16_w {
  static constexpr int values = 8, unroll = 4;
  static constexpr bool float_x = true;
  struct regs { uint4 w; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t*, int u, regs& r) { r.w = ld16(q + 16 * u); }
  __device__ static float dot(const regs& r, int u, const float* x) {
    const float4 a = __ldca(reinterpret_cast<const float4*>(x + 8 * u)), b = __ldca(reinterpret_cast<const float4*>(x + 8 * u + 4));
    const float2 w0 = __half22float2(*reinterpret_cast<const __half2*>(&r.w.x));
    const float2 w1 = __half22float2(*reinterpret_cast<const __half2*>(&r.w.y));
    const float2 w2 = __half22float2(*reinterpret_cast<const __half2*>(&r.w.z));
    const float2 w3 = __half22float2(*reinterpret_cast<const __half2*>(&r.w.w));
    return w0.x * a.x + w0.y * a.y + w1.x * a.z + w1.y * a.w + w2.x * b.x + w2.y * b.y + w3.x * b.z + w3.y * b.w;
  }
};

struct bf16_w {
  static constexpr int values = 8, unroll = 4;
  static constexpr bool float_x = true;
  struct regs { uint4 w; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t*, int u, regs& r) { r.w = ld16(q + 16 * u); }
  __device__ static float lo(unsigned v) { return __uint_as_float(v << 16); }
  __device__ static float hi(unsigned v) { return __uint_as_float(v & 0xFFFF0000u); }
  __device__ static float dot(const regs& r, int u, const float* x) {
    const float4 a = __ldca(reinterpret_cast<const float4*>(x + 8 * u)), b = __ldca(reinterpret_cast<const float4*>(x + 8 * u + 4));
    return lo(r.w.x) * a.x + hi(r.w.x) * a.y + lo(r.w.y) * a.z + hi(r.w.y) * a.w + lo(r.w.z) * b.x + hi(r.w.z) * b.y +
           lo(r.w.w) * b.z + hi(r.w.w) * b.w;
  }
};

struct q8_0_w {
  static constexpr int values = 32, unroll = 2;
  static constexpr bool float_x = false;
  struct regs { uint4 a, b; float d; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t* s, int u, regs& r) {
    r.a = ld16(q + 32 * u);
    r.b = ld16(q + 32 * u + 16);
    r.d = ldh(s + 2 * u);
  }
  __device__ static float dot(const regs& r, int u, const std::int8_t* xq, const float2* xds) {
    const int4 x0 = ldx16(xq + 32 * u), x1 = ldx16(xq + 32 * u + 16);
    int s = __dp4a(static_cast<int>(r.a.x), x0.x, 0);
    s = __dp4a(static_cast<int>(r.a.y), x0.y, s);
    s = __dp4a(static_cast<int>(r.a.z), x0.z, s);
    s = __dp4a(static_cast<int>(r.a.w), x0.w, s);
    s = __dp4a(static_cast<int>(r.b.x), x1.x, s);
    s = __dp4a(static_cast<int>(r.b.y), x1.y, s);
    s = __dp4a(static_cast<int>(r.b.z), x1.z, s);
    s = __dp4a(static_cast<int>(r.b.w), x1.w, s);
    return r.d * __ldca(xds + u).x * static_cast<float>(s);
  }
};

/// The 32 nibbles of a q4_0 / q4_1 block dotted with its 32 activation levels.
__device__ __forceinline__ int dot_block_nibbles(const uint4& q, const std::int8_t* x) {
  const int4 x0 = ldx16(x), x1 = ldx16(x + 16);
  int s = dot_nibbles(q.x, x0.x, x1.x, 0);
  s = dot_nibbles(q.y, x0.y, x1.y, s);
  s = dot_nibbles(q.z, x0.z, x1.z, s);
  return dot_nibbles(q.w, x0.w, x1.w, s);
}

struct q4_0_w {
  static constexpr int values = 32, unroll = 4;
  static constexpr bool float_x = false;
  struct regs { uint4 q; float d; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t* s, int u, regs& r) {
    r.q = ld16(q + 16 * u);
    r.d = ldh(s + 2 * u);
  }
  __device__ static float dot(const regs& r, int u, const std::int8_t* xq, const float2* xds) {
    const int s = dot_block_nibbles(r.q, xq + 32 * u);
    const float2 ds = __ldca(xds + u);
    return r.d * (ds.x * static_cast<float>(s) - 8.0f * ds.y);
  }
};

struct q4_1_w {
  static constexpr int values = 32, unroll = 4;
  static constexpr bool float_x = false;
  struct regs { uint4 q; unsigned dm; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t* s, int u, regs& r) {
    r.q = ld16(q + 16 * u);
    r.dm = __ldg(reinterpret_cast<const unsigned*>(s) + u);
  }
  __device__ static float dot(const regs& r, int u, const std::int8_t* xq, const float2* xds) {
    const int s = dot_block_nibbles(r.q, xq + 32 * u);
    const float2 ds = __ldca(xds + u);
    return half_bits(r.dm & 0xFFFFu) * ds.x * static_cast<float>(s) + half_bits(r.dm >> 16) * ds.y;
  }
};

/// q4_K and q5_K: a unit is group j (64 values: sub-blocks 2j and 2j + 1) of super-block u / 4.
template <bool five>
struct k45_w {
  static constexpr int values = 64, unroll = 2;
  static constexpr bool float_x = false;
  static constexpr int block = five ? 176 : 144, qs_at = five ? 48 : 16;
  struct regs { uint4 h, q0, q1, h0, h1; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t*, int u, regs& r) {
    const std::uint8_t* b = q + static_cast<std::size_t>(u >> 2) * block;
    r.h = ld16(b);
    r.q0 = ld16(b + qs_at + 32 * (u & 3));
    r.q1 = ld16(b + qs_at + 32 * (u & 3) + 16);
    if constexpr (five) {
      r.h0 = ld16(b + 16);
      r.h1 = ld16(b + 32);
    }
  }
  /// Four levels of sub-block 2j (low) or 2j + 1 (high nibbles) with their fifth bit.
  __device__ static int lo(unsigned q, unsigned qh, int j) {
    int v = static_cast<int>(q & k_lo);
    if constexpr (five) v |= static_cast<int>(((qh >> (2 * j)) & 0x01010101u) << 4);
    return v;
  }
  __device__ static int hi(unsigned q, unsigned qh, int j) {
    int v = static_cast<int>((q >> 4) & k_lo);
    if constexpr (five) v |= static_cast<int>(((qh >> (2 * j + 1)) & 0x01010101u) << 4);
    return v;
  }
  __device__ static float dot(const regs& r, int u, const std::int8_t* xq, const float2* xds) {
    const int sb = u >> 2, j = u & 3;
    const std::int8_t* x = xq + 256 * sb + 64 * j;
    const int4 a0 = ldx16(x), a1 = ldx16(x + 16), b0 = ldx16(x + 32), b1 = ldx16(x + 48);
    int s0 = __dp4a(lo(r.q0.x, r.h0.x, j), a0.x, 0), s1 = __dp4a(hi(r.q0.x, r.h0.x, j), b0.x, 0);
    s0 = __dp4a(lo(r.q0.y, r.h0.y, j), a0.y, s0), s1 = __dp4a(hi(r.q0.y, r.h0.y, j), b0.y, s1);
    s0 = __dp4a(lo(r.q0.z, r.h0.z, j), a0.z, s0), s1 = __dp4a(hi(r.q0.z, r.h0.z, j), b0.z, s1);
    s0 = __dp4a(lo(r.q0.w, r.h0.w, j), a0.w, s0), s1 = __dp4a(hi(r.q0.w, r.h0.w, j), b0.w, s1);
    s0 = __dp4a(lo(r.q1.x, r.h1.x, j), a1.x, s0), s1 = __dp4a(hi(r.q1.x, r.h1.x, j), b1.x, s1);
    s0 = __dp4a(lo(r.q1.y, r.h1.y, j), a1.y, s0), s1 = __dp4a(hi(r.q1.y, r.h1.y, j), b1.y, s1);
    s0 = __dp4a(lo(r.q1.z, r.h1.z, j), a1.z, s0), s1 = __dp4a(hi(r.q1.z, r.h1.z, j), b1.z, s1);
    s0 = __dp4a(lo(r.q1.w, r.h1.w, j), a1.w, s0), s1 = __dp4a(hi(r.q1.w, r.h1.w, j), b1.w, s1);
    int sc0, m0, sc1, m1;
    scale_min(2 * j, r.h.y, r.h.z, r.h.w, sc0, m0);
    scale_min(2 * j + 1, r.h.y, r.h.z, r.h.w, sc1, m1);
    const float2 ds0 = __ldca(xds + 8 * sb + 2 * j), ds1 = __ldca(xds + 8 * sb + 2 * j + 1);
    const float d = half_bits(r.h.x & 0xFFFFu), dmin = half_bits(r.h.x >> 16);
    return d * (static_cast<float>(sc0) * ds0.x * static_cast<float>(s0) + static_cast<float>(sc1) * ds1.x * static_cast<float>(s1)) -
           dmin * (static_cast<float>(m0) * ds0.y + static_cast<float>(m1) * ds1.y);
  }
};

/// q6_K: a unit is 64 values of super-block u / 4: half h = (u / 2) % 2 (128 values), and in it
/// the positions l of [16 a, 16 a + 16), a = u % 2, of each of its four runs of 32.
struct q6_k_w {
  static constexpr int values = 64, unroll = 2;
  static constexpr bool float_x = false;
  struct regs { uint4 la, lb, qh; uint2 sc; float d; };
  __device__ static void load(const std::uint8_t* q, const std::uint8_t* s, int u, regs& r) {
    const std::uint8_t* b = q + static_cast<std::size_t>(u >> 2) * 208;
    const int h = (u >> 1) & 1, a = u & 1;
    r.la = ld16(b + 64 * h + 16 * a);
    r.lb = ld16(b + 64 * h + 32 + 16 * a);
    r.qh = ld16(b + 128 + 32 * h + 16 * a);
    r.sc = __ldg(reinterpret_cast<const uint2*>(b + 192 + 8 * h));
    r.d = ldh(s + 2 * (u >> 2));
  }
  /// The 16 levels of run t from the words of la or lb and qh, dotted with x.
  template <int t>
  __device__ static int run(const regs& r, const int4& x) {
    const uint4& l = t % 2 == 0 ? r.la : r.lb;
    constexpr int lshift = t < 2 ? 0 : 4, hshift = 2 * t;
    auto level = [&](unsigned lw, unsigned hw) {
      return minus32(((lw >> lshift) & k_lo) | (((hw >> hshift) & 0x03030303u) << 4));
    };
    int s = __dp4a(level(l.x, r.qh.x), x.x, 0);
    s = __dp4a(level(l.y, r.qh.y), x.y, s);
    s = __dp4a(level(l.z, r.qh.z), x.z, s);
    return __dp4a(level(l.w, r.qh.w), x.w, s);
  }
  __device__ static float dot(const regs& r, int u, const std::int8_t* xq, const float2* xds) {
    const int sb = u >> 2, h = (u >> 1) & 1, a = u & 1;
    const std::int8_t* x = xq + 256 * sb + 128 * h + 16 * a;
    const float2* ds = xds + 8 * sb + 4 * h;
    const int sh = 8 * a;
    const float s0 = static_cast<float>(static_cast<std::int8_t>(r.sc.x >> sh)) * __ldca(ds).x * static_cast<float>(run<0>(r, ldx16(x)));
    const float s1 = static_cast<float>(static_cast<std::int8_t>(r.sc.x >> (sh + 16))) * __ldca(ds + 1).x * static_cast<float>(run<1>(r, ldx16(x + 32)));
    const float s2 = static_cast<float>(static_cast<std::int8_t>(r.sc.y >> sh)) * __ldca(ds + 2).x * static_cast<float>(run<2>(r, ldx16(x + 64)));
    const float s3 = static_cast<float>(static_cast<std::int8_t>(r.sc.y >> (sh + 16))) * __ldca(ds + 3).x * static_cast<float>(run<3>(r, ldx16(x + 96)));
    return r.d * (s0 + s1 + s2 + s3);
  }
};

/// What one launch computes: up to k_matvec_max_outputs matrices of one type and k, their rows
/// taken one after the other (matrix i holds the launch's rows [end[i - 1], end[i])).
struct mv_args {
  const std::uint8_t* q[k_matvec_max_outputs];
  const std::uint8_t* s[k_matvec_max_outputs];
  float* y[k_matvec_max_outputs];
  int end[k_matvec_max_outputs];
  int count;
  unsigned add;  // bit i: matrix i's products are added to its y rather than written
  std::size_t q_row, s_row;
  int units, k, n;
  const float* x;
  const std::int8_t* xq;
  const float2* xds;
  matvec_rope rope;  // rope.angles.pos null: no RoPE epilogue
};

/// Where one row's product goes: its matrix's weights and scales, its y, and whether it adds.
struct mv_row {
  const std::uint8_t* q;
  const std::uint8_t* s;
  float* y;  // y[b * stride] is the row's output for activation row b
  int stride;
  bool add;
  int matrix, local;  // its matrix, and its row in it
};

/// Row `row` of the launch (< a.end[a.count - 1]): the matrix it is in, picked with compile-time
/// indices only, so that the arguments stay in constant memory.
__device__ __forceinline__ mv_row locate(const mv_args& a, int row) {
  const std::uint8_t* q = a.q[0];
  const std::uint8_t* s = a.s[0];
  float* y = a.y[0];
  int first = 0, rows = a.end[0], matrix = 0;
  bool add = a.add & 1u;
#pragma unroll
  for (int i = 1; i < k_matvec_max_outputs; ++i) {
    if (i < a.count && row >= a.end[i - 1]) {
      q = a.q[i], s = a.s[i], y = a.y[i];
      first = a.end[i - 1], rows = a.end[i] - a.end[i - 1];
      add = (a.add >> i) & 1u;
      matrix = i;
    }
  }
  return {q + static_cast<std::size_t>(row - first) * a.q_row, s + static_cast<std::size_t>(row - first) * a.s_row,
          y + (row - first), rows, add, matrix, row - first};
}

/// The RoPE epilogue (matvec_rope) of one row pair of one activation row: y0, y1 are rows 2i and
/// 2i + 1 of their matrix (every matrix has an even number of rows, so a warp's two rows are one
/// pair). The operations of rope_store_kv_kernel in its order.
__device__ __forceinline__ void rope_pair(const matvec_rope& p, const mv_row& r0, const mv_row& r1, float y0, float y1) {
  float v0 = y0, v1 = y1;
  const int c = r0.local % p.head_dim;
  const rope_args& a = p.angles;
  if (((p.rotate >> r0.matrix) & 1u) && c < a.n_rot) {
    const int i = c / 2;
    const float pp = static_cast<float>(a.pos[0]) * a.freq_scale;
    float theta = pp * a.inv_freq[i];
    if (a.factors) theta /= a.factors[i];
    float sn, cs;
    sincosf(theta, &sn, &cs);
    const float x0 = y0, x1 = y1;
    v0 = x0 * cs - x1 * sn;
    v1 = x0 * sn + x1 * cs;
  }
  r0.y[0] = v0;
  r1.y[0] = v1;
  if (r0.matrix == p.to_k || r0.matrix == p.to_v) {
    auto* pages = static_cast<__half*>(r0.matrix == p.to_k ? p.k_pages : p.v_pages);
    const std::size_t at = static_cast<std::size_t>(p.slots[0]) * p.kv_dim + r0.local;
    pages[at] = __float2half_rn(v0);
    pages[at + 1] = __float2half_rn(v1);
  }
}

/// y[b * rows + row] for b < n: each warp takes R consecutive rows (the activations it loads serve
/// all R) and walks their units, U at a time per lane. NB is the compile-time bound on n (1, or
/// k_matvec_max_batch with n read at run time). With KS = k_warps the block's warps share the R
/// rows, each taking every KS-th trip of units, and add their sums in shared memory (for long
/// rows: more loads in flight than one warp a row group gives). The first units' weights are
/// loaded before pdl_wait (pdl.cuh): they overlap the kernel before.
template <class W, int NB, int R, int U, int KS, bool RP = false>
__global__ void __launch_bounds__(k_warps * 32) matvec_kernel(const mv_args a) {
  static_assert(KS == 1 || (KS == k_warps && NB == 1), "a block is one row group, of one activation row");
  static_assert(!RP || (R == 2 && NB == 1), "the RoPE epilogue takes a row pair of one activation row");
  pdl_launch_dependents();
  const int wib = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int warp = KS == 1 ? static_cast<int>(blockIdx.x) * k_warps + wib : static_cast<int>(blockIdx.x);
  const int slice = KS == 1 ? 0 : wib, first_u = lane + 32 * U * slice;
  const int total = a.end[a.count - 1], row0 = warp * R;
  if (row0 >= total) {  // the whole block when KS > 1
    pdl_wait();
    return;
  }
  // A row past the end reads row0's weights again (no branch in the loads) and writes nothing.
  mv_row rw[R];
#pragma unroll
  for (int j = 0; j < R; ++j) rw[j] = locate(a, row0 + j < total ? row0 + j : row0);
  float acc[NB][R];
#pragma unroll
  for (int b = 0; b < NB; ++b) {
#pragma unroll
    for (int j = 0; j < R; ++j) acc[b][j] = 0.0f;
  }
  const int units = a.units, k = a.k;
  if (first_u >= units) pdl_wait();  // a lane with no units reads nothing either
  for (int u0 = first_u; u0 < units; u0 += 32 * U * KS) {
    typename W::regs r[U][R];
#pragma unroll
    for (int i = 0; i < U; ++i)
      if (u0 + 32 * i < units) {
#pragma unroll
        for (int j = 0; j < R; ++j) W::load(rw[j].q, rw[j].s, u0 + 32 * i, r[i][j]);
      }
    if (u0 == first_u) pdl_wait();  // the first trip's weights are in flight meanwhile
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int u = u0 + 32 * i;
      if (u >= units) break;
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        if (NB > 1 && b >= a.n) break;
#pragma unroll
        for (int j = 0; j < R; ++j) {
          if constexpr (W::float_x) acc[b][j] += W::dot(r[i][j], u, a.x + static_cast<std::size_t>(b) * k);
          else acc[b][j] += W::dot(r[i][j], u, a.xq + static_cast<std::size_t>(b) * k, a.xds + static_cast<std::size_t>(b) * (k / 32));
        }
      }
    }
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[b][j] += __shfl_xor_sync(0xFFFFFFFFu, acc[b][j], o);
    }
  }
  if constexpr (KS > 1) {
    __shared__ float part[KS][R];
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < R; ++j) part[slice][j] = acc[0][j];
    }
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      acc[0][j] = part[0][j];
#pragma unroll
      for (int i = 1; i < KS; ++i) acc[0][j] += part[i][j];
    }
  }
  if constexpr (RP) {  // rows come in pairs here: row0 is even and total too
    if (lane == 0) rope_pair(a.rope, rw[0], rw[1], acc[0][0], acc[0][1]);
    return;
  }
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      if (row0 + j >= total) break;
#pragma unroll
      for (int b = 0; b < NB; ++b)
        if (NB == 1 || b < a.n) {
          float& out = rw[j].y[static_cast<std::size_t>(b) * rw[j].stride];
          out = rw[j].add ? out + acc[b][j] : acc[b][j];
        }
    }
  }
}

/// Rows per warp and units in flight per lane of the one-row kernel, per type. Measured on the
/// H100 (kernels/cuda/NOTES.md): q8_0, q4_K and q6_K take two rows a warp, one unit of each in
/// flight per lane (the same registers as one row of two units, half the activation loads); the
/// others one row of `unroll` units, as measured before. STRATA_CUDA_MATVEC="q4_K=1x2,q6_K=2x2"
/// (type=RxU, R 1 or 2, U 1, 2 or 4) overrides them, for comparison.
struct mv_shape {
  int rows, unroll;
};

template <class W>
mv_shape default_shape(dtype t) {
  if (t == dtype::q8_0 || t == dtype::q4_k || t == dtype::q6_k) return {2, 1};
  return {1, W::unroll};
}

template <class W>
mv_shape shape_for(dtype t) {
  static const mv_shape chosen = [t] {
    mv_shape sh = default_shape<W>(t);
    const char* env = std::getenv("STRATA_CUDA_MATVEC");
    if (!env) return sh;
    const std::string spec(env), name = std::string(dtype_name(t)) + "=";
    for (std::size_t at = spec.find(name); at != std::string::npos; at = spec.find(name, at + 1)) {
      if (at > 0 && spec[at - 1] != ',') continue;
      int r = 0, u = 0;
      if (std::sscanf(spec.c_str() + at + name.size(), "%dx%d", &r, &u) == 2 && (r == 1 || r == 2) && (u == 1 || u == 2 || u == 4))
        sh = {r, u};
      break;
    }
    return sh;
  }();
  return chosen;
}

/// Values per row from which the one-row kernel splits each row group over a block's warps (KS):
/// the down projection's 14,336 (measured for q8_0, q4_K and q6_K; the 4,096 of the other
/// matrices stay one warp a row group). STRATA_CUDA_MATVEC_SPLIT=values changes it (0: never),
/// for comparison.
int split_k() {
  static const int n = [] {
    const char* v = std::getenv("STRATA_CUDA_MATVEC_SPLIT");
    if (!v) return 8192;
    const int k = std::atoi(v);
    return k > 0 ? k : 1 << 30;
  }();
  return n;
}

template <class W, int R, int U, bool RP = false>
void launch_one(const mv_args& a, cudaStream_t stream) {
  const int groups = (a.end[a.count - 1] + R - 1) / R;
  const dim3 block(k_warps * 32);
  if (a.k >= split_k()) {
    launch_pdl("matvec", matvec_kernel<W, 1, R, U, k_warps, RP>, dim3(static_cast<unsigned>(groups)), block, 0, stream, a);
    return;
  }
  launch_pdl("matvec", matvec_kernel<W, 1, R, U, 1, RP>, dim3(static_cast<unsigned>((groups + k_warps - 1) / k_warps)), block, 0, stream,
             a);
}

/// The types whose one-row kernel may take two rows a warp: those with a RoPE epilogue instance.
template <class W>
constexpr bool pairs_rows = std::is_same_v<W, q8_0_w> || std::is_same_v<W, k45_w<false>> || std::is_same_v<W, q6_k_w>;

template <class W>
void launch(mv_args a, dtype t, cudaStream_t stream) {
  a.units = a.k / W::values;
  if (a.n > 1) {
    const dim3 grid(static_cast<unsigned>((a.end[a.count - 1] + k_warps - 1) / k_warps)), block(k_warps * 32);
    launch_pdl("matvec", matvec_kernel<W, k_matvec_max_batch, 1, W::unroll, 1>, grid, block, 0, stream, a);
    return;
  }
  const mv_shape sh = shape_for<W>(t);
  if constexpr (pairs_rows<W>) {
    if (a.rope.angles.pos) return launch_one<W, 2, 1, true>(a, stream);  // matvec_rope_supported: the 2x1 shape
  }
  if (sh.rows == 2) {
    if (sh.unroll == 1) return launch_one<W, 2, 1>(a, stream);
    if (sh.unroll == 2) return launch_one<W, 2, 2>(a, stream);
    return launch_one<W, 2, 4>(a, stream);
  }
  if (sh.unroll == 1) return launch_one<W, 1, 1>(a, stream);
  if (sh.unroll == 2) return launch_one<W, 1, 2>(a, stream);
  return launch_one<W, 1, 4>(a, stream);
}

__global__ void quantize_act_kernel(const float* x, int blocks, std::int8_t* __restrict__ q, float2* __restrict__ ds) {
  pdl_launch_dependents();
  pdl_wait();
  const int blk = blockIdx.x * (blockDim.x / 32) + static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (blk >= blocks) return;
  quantize_block(x[static_cast<std::size_t>(blk) * 32 + lane], lane, q + static_cast<std::size_t>(blk) * 32, ds + blk);
}

}  // namespace

void quantize_act(const float* x, int n, act_q8& a, cudaStream_t stream) {
  if (n < 1 || n > a.max_rows) throw std::invalid_argument("quantize_act: more rows than the buffer holds");
  const int blocks = static_cast<int>(a.k / 32) * n;
  constexpr int per_cta = 8;
  launch_pdl("quantize_act", quantize_act_kernel, (blocks + per_cta - 1) / per_cta, per_cta * 32, 0, stream, x, blocks,
             a.q.as<std::int8_t>(), a.ds.as<float2>());
}

namespace {

void matvec_launch(const matvec_out* outs, int count, const float* x, const act_q8* xq, int n, const matvec_rope* rope,
                   cudaStream_t stream) {
  if (count < 1 || count > k_matvec_max_outputs)
    throw std::invalid_argument("matvec_many: 1 to k_matvec_max_outputs products");
  if (n < 1 || n > k_matvec_max_batch) throw std::invalid_argument("matvec: 1 to k_matvec_max_batch activation rows");
  const device_matrix& w0 = *outs[0].w;
  const bool float_x = w0.type == dtype::f16 || w0.type == dtype::bf16;
  if (float_x ? x == nullptr : (xq == nullptr || xq->k != w0.k || xq->max_rows < n))
    throw std::invalid_argument("matvec: activations missing or of another length");
  mv_args a{};
  a.count = count;
  a.q_row = w0.q_row_bytes;
  a.s_row = w0.s_row_bytes;
  a.k = static_cast<int>(w0.k);
  a.n = n;
  a.x = x;
  a.xq = xq ? xq->q.as<const std::int8_t>() : nullptr;
  a.xds = xq ? xq->ds.as<const float2>() : nullptr;
  long long end = 0;
  for (int i = 0; i < a.count; ++i) {
    const device_matrix& w = *outs[i].w;
    if (w.type != w0.type || w.k != w0.k) throw std::invalid_argument("matvec_many: the matrices differ in type or k");
    a.q[i] = w.q.as<const std::uint8_t>();
    a.s[i] = w.s.as<const std::uint8_t>();
    a.y[i] = outs[i].y;
    if (outs[i].add) a.add |= 1u << i;
    end += w.rows;
    if (end > (1LL << 30)) throw std::invalid_argument("matvec_many: too many rows");
    a.end[i] = static_cast<int>(end);
  }
  if (rope) {
    if (!matvec_rope_supported(w0.type, n) || rope->head_dim <= 0 || rope->head_dim % 2 != 0 || rope->angles.n_rot > rope->head_dim ||
        rope->angles.neox || !rope->angles.pos || !rope->slots || rope->to_k >= count || rope->to_v >= count)
      throw std::invalid_argument("matvec_many_rope: not for these weights, rows or heads");
    for (int i = 0; i < count; ++i)
      if (outs[i].add || outs[i].w->rows % 2 != 0) throw std::invalid_argument("matvec_many_rope: products must be written, in pairs");
    a.rope = *rope;
  }
  switch (w0.type) {
    case dtype::f16: return launch<f16_w>(a, w0.type, stream);
    case dtype::bf16: return launch<bf16_w>(a, w0.type, stream);
    case dtype::q8_0: return launch<q8_0_w>(a, w0.type, stream);
    case dtype::q4_0: return launch<q4_0_w>(a, w0.type, stream);
    case dtype::q4_1: return launch<q4_1_w>(a, w0.type, stream);
    case dtype::q4_k: return launch<k45_w<false>>(a, w0.type, stream);
    case dtype::q5_k: return launch<k45_w<true>>(a, w0.type, stream);
    case dtype::q6_k: return launch<q6_k_w>(a, w0.type, stream);
    default: throw std::invalid_argument("matvec: unsupported weight type");
  }
}

}  // namespace

void matvec_many(const matvec_out* outs, int count, const float* x, const act_q8* xq, int n, cudaStream_t stream) {
  matvec_launch(outs, count, x, xq, n, nullptr, stream);
}

bool matvec_rope_supported(dtype t, int n) {
  // STRATA_CUDA_ROPE_IN_MATVEC=0: never (RoPE and the page writes by rope_store_kv), for comparison.
  static const bool off = [] {
    const char* v = std::getenv("STRATA_CUDA_ROPE_IN_MATVEC");
    return v && std::string(v) == "0";
  }();
  if (off || n != 1) return false;
  switch (t) {
    case dtype::q8_0: return shape_for<q8_0_w>(t).rows == 2 && shape_for<q8_0_w>(t).unroll == 1;
    case dtype::q4_k: return shape_for<k45_w<false>>(t).rows == 2 && shape_for<k45_w<false>>(t).unroll == 1;
    case dtype::q6_k: return shape_for<q6_k_w>(t).rows == 2 && shape_for<q6_k_w>(t).unroll == 1;
    default: return false;
  }
}

void matvec_many_rope(const matvec_out* outs, int count, const act_q8* xq, const matvec_rope& rope, cudaStream_t stream) {
  matvec_launch(outs, count, nullptr, xq, 1, &rope, stream);
}

void matvec(const device_matrix& w, const float* x, const act_q8* xq, int n, float* y, cudaStream_t stream) {
  const matvec_out one{&w, y};
  matvec_many(&one, 1, x, xq, n, stream);
}

}  // namespace strata::kernels::cuda
