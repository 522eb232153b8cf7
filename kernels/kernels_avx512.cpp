// AVX-512 (F, BW, VL, DQ) variants (this file is compiled with those flags; it runs only where
// cpu_supports(avx512) said so). Tails use masked loads, so every length takes the vector path.
#include <immintrin.h>

#include "kernels/simd.hpp"

namespace strata::kernels::avx512 {
namespace {
inline __mmask16 tail_mask(std::int64_t left) { return static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1); }
}  // namespace

float dot(const float* a, const float* b, std::int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void dot_4x4(const float* w, const float* x, std::int64_t k, float out[4][4]) {
  __m512 acc[4][4];
  for (auto& r : acc)
    for (auto& c : r) c = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < k; i += 16) {
    __mmask16 m = tail_mask(k - i);
    __m512 xv[4];
    for (int c = 0; c < 4; ++c) xv[c] = _mm512_maskz_loadu_ps(m, x + c * k + i);
    for (int r = 0; r < 4; ++r) {
      __m512 wv = _mm512_maskz_loadu_ps(m, w + r * k + i);
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) out[r][c] = _mm512_reduce_add_ps(acc[r][c]);
}

void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(h));
  }
}

void axpy(float a, const float* x, float* y, std::int64_t n) {
  __m512 av = _mm512_set1_ps(a);
  for (std::int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

}  // namespace strata::kernels::avx512
