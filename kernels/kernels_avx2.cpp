// AVX2 + FMA + F16C variants (this file is compiled with those flags; it runs only where
// cpu_supports(avx2) said so).
#include <immintrin.h>

#include "kernels/simd.hpp"

namespace strata::kernels::avx2 {
namespace {
inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
}  // namespace

float dot(const float* a, const float* b, std::int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float t = hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

void dot_4x4(const float* w, const float* x, std::int64_t k, float out[4][4]) {
  __m256 acc[4][4];
  for (auto& r : acc)
    for (auto& c : r) c = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 xv[4];
    for (int c = 0; c < 4; ++c) xv[c] = _mm256_loadu_ps(x + c * k + i);
    for (int r = 0; r < 4; ++r) {
      __m256 wv = _mm256_loadu_ps(w + r * k + i);
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      float t = hsum(acc[r][c]);
      for (std::int64_t j = i; j < k; ++j) t += w[r * k + j] * x[c * k + j];
      out[r][c] = t;
    }
}

void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) scalar::f16_to_f32(src + i, dst + i, n - i);
}

void axpy(float a, const float* x, float* y, std::int64_t n) {
  __m256 av = _mm256_set1_ps(a);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace strata::kernels::avx2
