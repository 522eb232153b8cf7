// The AVX2 + FMA + F16C attention variant. The target is set for this file's own code only
// (standard headers are included before it), and it runs only where simd_level_enabled(avx2) said so.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <immintrin.h>

#include "kernels/attention.hpp"
#include "kernels/quants.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/attention_impl.hpp"
#include "kernels/attention_quant_x86.hpp"

namespace strata::kernels::avx2 {
namespace {

struct avx2_math {
  static float dot(const float* a, const float* b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float t = detail::hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; ++i) t += a[i] * b[i];
    return t;
  }
  static void axpy(float a, const float* x, float* acc, int n) {
    const __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; ++i) acc[i] += a * x[i];
  }
};

}  // namespace

void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end) {
  detail::attention_dispatch<avx2_math, detail::f16_rows_x86, detail::q8_0_rows_x86, detail::q4_0_rows_x86>(s, kv, rows, n_rows, head_begin, head_end);
}

}  // namespace strata::kernels::avx2

#pragma GCC pop_options
