// The AVX-512 attention variant (F and F16C conversions). The target is set for this file's own
// code only (standard headers are included before it), and it runs only where
// simd_level_enabled(avx512) said so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <immintrin.h>

#include "kernels/attention.hpp"
#include "kernels/quants.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")
// GCC 12's own AVX-512 reduction intrinsics trip its uninitialized-use analysis.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/attention_impl.hpp"
#include "kernels/attention_quant_x86.hpp"

namespace strata::kernels::avx512 {
namespace {

/// e^x in 16 lanes: x = n ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf polynomial (about 1 ulp),
/// 2^n applied by scalef. Below -104 the result is exactly 0 (so is e^-inf); above 88.5 it saturates.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-200.0f)), _mm512_set1_ps(88.5f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2 in two parts: exact n * hi
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

/// The lanes of a tile chunk starting at j that exist (n values in all).
inline __mmask16 lanes(int j, int n) { return n - j >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (n - j)) - 1); }

/// dst[c * dst_stride + i] = lane c of r[i] for 16 vectors of 16 floats.
inline void transpose16_regs(__m512 (&r)[16], float* dst, std::int64_t dst_stride) {
  __m512 t[16];
  // Within each 128-bit lane: pairs of rows interleaved, then quads.
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {
    r[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    r[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    r[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    r[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  // Lane L of r[4k + m] now holds column 4L + m of rows 4k .. 4k+3: gather the four lanes.
  for (int m = 0; m < 4; ++m) {
    const __m512 u0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), u1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88), u3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
    _mm512_storeu_ps(dst + m * dst_stride, _mm512_shuffle_f32x4(u0, u2, 0x88));
    _mm512_storeu_ps(dst + (4 + m) * dst_stride, _mm512_shuffle_f32x4(u1, u3, 0x88));
    _mm512_storeu_ps(dst + (8 + m) * dst_stride, _mm512_shuffle_f32x4(u0, u2, 0xDD));
    _mm512_storeu_ps(dst + (12 + m) * dst_stride, _mm512_shuffle_f32x4(u1, u3, 0xDD));
  }
}

/// dst[c * dst_stride + r] = src[r * src_stride + c] for a 16 x 16 block of floats.
inline void transpose16(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
  transpose16_regs(r, dst, dst_stride);
}

/// Values d .. d+15 of one KV row of the Load's format, as f32 in a register: the same values
/// (the same products, for q8_0) that Load::rows writes into a tile. ok says which formats have it.
template <class Load>
struct row16 {
  static constexpr bool ok = false;
  static __m512 at(const std::byte*, int) { return _mm512_setzero_ps(); }
};
template <>
struct row16<detail::f16_rows_x86> {
  static constexpr bool ok = true;
  static __m512 at(const std::byte* row, int d) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * static_cast<std::ptrdiff_t>(d))));
  }
};
template <>
struct row16<detail::q8_0_rows_x86> {
  static constexpr bool ok = true;
  static __m512 at(const std::byte* row, int d) {
    const auto* b = reinterpret_cast<const block_q8_0*>(row) + d / k_qk;
    const __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + d % k_qk))));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), x);
  }
};

/// out[i][j] = q[i] . k[j] for M queries and the keys of a transposed tile, kt[d][j] (V vectors of
/// 16 keys): each key vector is loaded once per dimension for all M queries, each query value
/// broadcast once for all keys.
template <int M, int V>
inline void scores_block(const float* const* q, const float (*kt)[detail::k_attention_tile], int hd, float* const* out) {
  __m512 a[M][V];
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < V; ++v) a[i][v] = _mm512_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    __m512 k[V];
    for (int v = 0; v < V; ++v) k[v] = _mm512_load_ps(kt[d] + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512 qd = _mm512_set1_ps(q[i][d]);
      for (int v = 0; v < V; ++v) a[i][v] = _mm512_fmadd_ps(qd, k[v], a[i][v]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(out[i] + 16 * v, a[i][v]);
}

/// acc[i][d0 ..] += sum_j p[i][j] v_j[d0 ..] for M accumulators, W vectors of 16 dimensions from d0,
/// v_j's 16 values at d being row(j, d): each value vector is loaded once for all M.
template <int M, int W, class Row>
[[gnu::always_inline]] inline void accumulate_with(const float* const* p, int n, float* const* acc, int d0, Row row) {
  __m512 a[M][W];
  for (int i = 0; i < M; ++i)
    for (int w = 0; w < W; ++w) a[i][w] = _mm512_loadu_ps(acc[i] + d0 + 16 * w);
  for (int j = 0; j < n; ++j) {
    __m512 x[W];
    for (int w = 0; w < W; ++w) x[w] = row(j, d0 + 16 * w);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m512 pj = _mm512_set1_ps(p[i][j]);
      for (int w = 0; w < W; ++w) a[i][w] = _mm512_fmadd_ps(pj, x[w], a[i][w]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(acc[i] + d0 + 16 * w, a[i][w]);
}

/// accumulate_with over a converted tile of values.
template <int M, int W>
inline void accumulate_block(const float* const* p, const float (*v)[detail::k_attention_tile_stride], int n, float* const* acc, int d0) {
  accumulate_with<M, W>(p, n, acc, d0, [v](int j, int d) __attribute__((always_inline)) { return _mm512_load_ps(v[j] + d); });
}

/// accumulate_with the values converted from the page rows (src, stride bytes apart) in
/// registers: the same products and sums.
template <int M, int W, class Load>
inline void accumulate_block_rows(const float* const* p, const std::byte* src, std::int64_t stride, int n, float* const* acc, int d0) {
  accumulate_with<M, W>(p, n, acc, d0, [src, stride](int j, int d) __attribute__((always_inline)) { return row16<Load>::at(src + j * stride, d); });
}

/// The scores of nq queries against the nv (1 or 2) blocks of 16 keys in the transposed tile kt,
/// eight queries at a time.
inline void scores_transposed(const float* const* q, int nq, const float (*kt)[detail::k_attention_tile], int hd, int nv,
                              float* const* out) {
  using block_fn = void (*)(const float* const*, const float (*)[detail::k_attention_tile], int, float* const*);
  static constexpr block_fn one[8] = {scores_block<1, 1>, scores_block<2, 1>, scores_block<3, 1>, scores_block<4, 1>,
                                      scores_block<5, 1>, scores_block<6, 1>, scores_block<7, 1>, scores_block<8, 1>};
  static constexpr block_fn two[8] = {scores_block<1, 2>, scores_block<2, 2>, scores_block<3, 2>, scores_block<4, 2>,
                                      scores_block<5, 2>, scores_block<6, 2>, scores_block<7, 2>, scores_block<8, 2>};
  for (int i = 0; i < nq; i += 8) {
    const int m = std::min(8, nq - i);
    (nv == 2 ? two : one)[m - 1](q + i, kt, hd, out + i);
  }
}

struct avx512_math {
  /// p *= scale, soft-capped as softcap * tanh(p / softcap) with tanh(y) = 1 - 2 / (e^2y + 1);
  /// returns the maximum.
  static float scale_max(float* p, int n, float scale, float softcap) {
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < n; j += 16) {
      const __mmask16 m = lanes(j, n);
      __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), sc);
      if (softcap > 0.0f) {
        const __m512 e = exp16(_mm512_mul_ps(x, _mm512_set1_ps(2.0f / softcap)));
        const __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
        x = _mm512_mul_ps(t, _mm512_set1_ps(softcap));
      }
      _mm512_mask_storeu_ps(p + j, m, x);
      mx = _mm512_mask_max_ps(mx, m, mx, x);
    }
    return _mm512_reduce_max_ps(mx);
  }
  /// p = e^(p - shift); returns the sum.
  static float exp_sum(float* p, int n, float shift) {
    const __m512 sh = _mm512_set1_ps(shift);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
      const __mmask16 m = lanes(j, n);
      const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), sh));
      _mm512_mask_storeu_ps(p + j, m, e);
      sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
  }
  static float dot(const float* a, const float* b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    float t = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; ++i) t += a[i] * b[i];
    return t;
  }
  /// out[i][j] = q[i] . k[j] for nq queries and the n keys of a tile: the tile is transposed (keys
  /// along the vector lanes), then scored 8 queries at a time as outer products, with no
  /// horizontal sums at all. Heads whose size is not a multiple of 16 take a dot per key.
  static void scores_many(const float* const* q, int nq, const float (*k)[detail::k_attention_tile_stride], int n, int hd,
                          float* const* out) {
    if (hd % 16 != 0) {
      for (int i = 0; i < nq; ++i)
        for (int j = 0; j < n; ++j) out[i][j] = dot(q[i], k[j], hd);
      return;
    }
    alignas(64) float kt[k_attention_max_head_dim][detail::k_attention_tile];
    const int nv = (n + 15) / 16;  // rows past n in the last 16 are stale: their lanes are never read
    for (int v = 0; v < nv; ++v)
      for (int d = 0; d < hd; d += 16) transpose16(k[16 * v] + d, detail::k_attention_tile_stride, kt[d] + 16 * v, detail::k_attention_tile);
    scores_transposed(q, nq, kt, hd, nv, out);
  }
  /// scores_many with the keys converted from the page rows (src, stride bytes apart) straight into
  /// the transposed tile, in registers: no f32 tile written and read back. Heads whose size is not
  /// a multiple of 16, and formats without row16, are left to the tile path (returns false).
  template <class Load>
  static bool scores_rows(Load, const float* const* q, int nq, const std::byte* src, std::int64_t stride, int n, int hd,
                          float* const* out) {
    if constexpr (!row16<Load>::ok) {
      return false;
    } else {
      if (hd % 16 != 0) return false;
      alignas(64) float kt[k_attention_max_head_dim][detail::k_attention_tile];
      const int nv = (n + 15) / 16;
      for (int v = 0; v < nv; ++v) {
        const int m = std::min(16, n - 16 * v);  // rows past n are not read from the page: zeros
        for (int d = 0; d < hd; d += 16) {
          __m512 r[16];
          for (int i = 0; i < 16; ++i) r[i] = i < m ? row16<Load>::at(src + (16 * v + i) * stride, d) : _mm512_setzero_ps();
          transpose16_regs(r, kt[d] + 16 * v, detail::k_attention_tile);
        }
      }
      scores_transposed(q, nq, kt, hd, nv, out);
      return true;
    }
  }
  /// accumulate_many with the values converted from the page rows in registers, where each value
  /// vector is read by one block of accumulators (nq <= 4, a decode row's group of heads): with more,
  /// each would be converted again per block, and the tile path converts once (returns false).
  template <class Load>
  static bool accumulate_rows(Load, const float* const* p, int nq, const std::byte* src, std::int64_t stride, int n,
                              float* const* acc, int hd) {
    if constexpr (!row16<Load>::ok) {
      return false;
    } else {
      if (hd % 16 != 0 || nq > 4) return false;
      using block_fn = void (*)(const float* const*, const std::byte*, std::int64_t, int, float* const*, int);
      static constexpr block_fn blocks[4][4] = {
          {accumulate_block_rows<1, 1, Load>, accumulate_block_rows<1, 2, Load>, accumulate_block_rows<1, 3, Load>, accumulate_block_rows<1, 4, Load>},
          {accumulate_block_rows<2, 1, Load>, accumulate_block_rows<2, 2, Load>, accumulate_block_rows<2, 3, Load>, accumulate_block_rows<2, 4, Load>},
          {accumulate_block_rows<3, 1, Load>, accumulate_block_rows<3, 2, Load>, accumulate_block_rows<3, 3, Load>, accumulate_block_rows<3, 4, Load>},
          {accumulate_block_rows<4, 1, Load>, accumulate_block_rows<4, 2, Load>, accumulate_block_rows<4, 3, Load>, accumulate_block_rows<4, 4, Load>},
      };
      for (int d0 = 0; d0 < hd; d0 += 64) blocks[nq - 1][std::min(4, (hd - d0) / 16) - 1](p, src, stride, n, acc, d0);
      return true;
    }
  }
  /// acc[i] += sum_j p[i][j] v[j] for nq accumulators, 4 of them and 64 dimensions at a time (the
  /// dimensions past the last multiple of 16 by axpy).
  static void accumulate_many(const float* const* p, int nq, const float (*v)[detail::k_attention_tile_stride], int n,
                              float* const* acc, int hd) {
    using block_fn = void (*)(const float* const*, const float (*)[detail::k_attention_tile_stride], int, float* const*, int);
    static constexpr block_fn blocks[4][4] = {
        {accumulate_block<1, 1>, accumulate_block<1, 2>, accumulate_block<1, 3>, accumulate_block<1, 4>},
        {accumulate_block<2, 1>, accumulate_block<2, 2>, accumulate_block<2, 3>, accumulate_block<2, 4>},
        {accumulate_block<3, 1>, accumulate_block<3, 2>, accumulate_block<3, 3>, accumulate_block<3, 4>},
        {accumulate_block<4, 1>, accumulate_block<4, 2>, accumulate_block<4, 3>, accumulate_block<4, 4>},
    };
    const int hd16 = hd / 16 * 16;
    for (int d0 = 0; d0 < hd16; d0 += 64) {
      const int w = std::min(4, (hd16 - d0) / 16);
      for (int i = 0; i < nq; i += 4) blocks[std::min(4, nq - i) - 1][w - 1](p + i, v, n, acc + i, d0);
    }
    if (hd16 < hd) {
      for (int i = 0; i < nq; ++i)
        for (int j = 0; j < n; ++j) axpy(p[i][j], v[j] + hd16, acc[i] + hd16, hd - hd16);
    }
  }
  static void axpy(float a, const float* x, float* acc, int n) {
    const __m512 av = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(acc + i)));
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_set1_ps(a), _mm256_loadu_ps(x + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; ++i) acc[i] += a * x[i];
  }
};

}  // namespace

void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end) {
  detail::attention_dispatch<avx512_math, detail::f16_rows_x86, detail::q8_0_rows_x86, detail::q4_0_rows_x86>(s, kv, rows, n_rows, head_begin, head_end);
}

}  // namespace strata::kernels::avx512

#pragma GCC diagnostic pop
#pragma GCC pop_options
