// The AVX-512 attention variant (F and F16C conversions). The target is set for this file's own
// code only (standard headers are included before it), and it runs only where
// cpu_supports(avx512) said so.
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

/// The sums of 16 vectors, as one vector: lane j holds the sum of a[j]'s 16 lanes.
inline __m512 fold16(const __m512 (&a)[16]) {
  __m512 b[8], c[4];
  // Pairs: each 128-bit lane of b[k] holds two partial sums of a[2k] and two of a[2k+1].
  for (int k = 0; k < 8; ++k)
    b[k] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * k], a[2 * k + 1]), _mm512_unpackhi_ps(a[2 * k], a[2 * k + 1]));
  // Quads: each 128-bit lane of c[m] holds one partial sum of a[4m], a[4m+1], a[4m+2], a[4m+3].
  for (int m = 0; m < 4; ++m)
    c[m] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * m], b[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * m], b[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Across the four 128-bit lanes: lane L of the result gathers the lanes of c[L].
  const __m512 e0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 e1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/// q . k[j] for j < n (n <= 16; lanes from n on are 0), hd a multiple of 16.
inline __m512 sums16(const float* q, const float (*k)[k_attention_max_head_dim], int n, int hd) {
  __m512 a[16];
  for (int j = 0; j < 16; ++j) a[j] = _mm512_setzero_ps();
  if (n == 16) {
    // The common case, unrolled so that the 16 sums stay in registers.
    for (int d = 0; d < hd; d += 16) {
      const __m512 qd = _mm512_loadu_ps(q + d);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) a[j] = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k[j] + d), a[j]);
    }
  } else {
    for (int d = 0; d < hd; d += 16) {
      const __m512 qd = _mm512_loadu_ps(q + d);
      for (int j = 0; j < n; ++j) a[j] = _mm512_fmadd_ps(qd, _mm512_loadu_ps(k[j] + d), a[j]);
    }
  }
  return fold16(a);
}

struct avx512_math {
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
  /// out[j] = q . k[j] for the n rows of a tile: 16 rows at a time, each row's products summed
  /// in a vector of its own, then the 16 vectors folded into one vector of 16 sums (a transpose
  /// by shuffles: 45 operations instead of 16 horizontal reductions).
  static void scores(const float* q, const float (*k)[k_attention_max_head_dim], int n, int hd, float* out) {
    if (hd % 16 != 0) {
      for (int j = 0; j < n; ++j) out[j] = dot(q, k[j], hd);
      return;
    }
    int j0 = 0;
    for (; j0 + 16 <= n; j0 += 16) _mm512_storeu_ps(out + j0, sums16(q, k + j0, 16, hd));
    if (j0 < n) {
      alignas(64) float tail[16];
      _mm512_store_ps(tail, sums16(q, k + j0, n - j0, hd));
      for (int j = j0; j < n; ++j) out[j] = tail[j - j0];
    }
  }
  /// acc += sum_j p[j] v[j], keeping up to 4 vectors of acc in registers across the tile.
  static void accumulate(const float* p, const float (*v)[k_attention_max_head_dim], int n, float* acc, int hd) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
      __m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16);
      __m512 a2 = _mm512_loadu_ps(acc + d + 32), a3 = _mm512_loadu_ps(acc + d + 48);
      for (int j = 0; j < n; ++j) {
        const __m512 pj = _mm512_set1_ps(p[j]);
        a0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v[j] + d), a0);
        a1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v[j] + d + 16), a1);
        a2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v[j] + d + 32), a2);
        a3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v[j] + d + 48), a3);
      }
      _mm512_storeu_ps(acc + d, a0);
      _mm512_storeu_ps(acc + d + 16, a1);
      _mm512_storeu_ps(acc + d + 32, a2);
      _mm512_storeu_ps(acc + d + 48, a3);
    }
    for (; d + 16 <= hd; d += 16) {
      __m512 a0 = _mm512_loadu_ps(acc + d);
      for (int j = 0; j < n; ++j) a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v[j] + d), a0);
      _mm512_storeu_ps(acc + d, a0);
    }
    if (d < hd) {
      for (int j = 0; j < n; ++j) axpy(p[j], v[j] + d, acc + d, hd - d);
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

void attention(const attention_shape& s, const kv_page_view& kv, std::int32_t first, std::int32_t last, const float* q,
               float* out, int head_begin, int head_end) {
  detail::attention_dispatch<avx512_math, detail::f16_rows_x86, detail::q8_0_rows_x86, detail::q4_0_rows_x86>(s, kv, first, last, q, out, head_begin, head_end);
}

}  // namespace strata::kernels::avx512

#pragma GCC diagnostic pop
#pragma GCC pop_options
