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

void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end) {
  detail::attention_dispatch<avx512_math, detail::f16_rows_x86, detail::q8_0_rows_x86, detail::q4_0_rows_x86>(s, kv, rows, n_rows, head_begin, head_end);
}

}  // namespace strata::kernels::avx512

#pragma GCC diagnostic pop
#pragma GCC pop_options
