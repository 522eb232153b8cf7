#include "kernels/attention.hpp"

#include "kernels/attention_impl.hpp"
#include "kernels/quants.hpp"

namespace strata::kernels {
namespace {

struct scalar_math {
  static float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static void axpy(float a, const float* x, float* acc, int n) {
    for (int i = 0; i < n; ++i) acc[i] += a * x[i];
  }
};

}  // namespace

namespace scalar {
void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end) {
  detail::attention_dispatch<scalar_math, detail::f16_rows, detail::q8_0_rows, detail::q4_0_rows>(s, kv, rows, n_rows, head_begin, head_end);
}
}  // namespace scalar

attention_fn attention_for(simd_level level) {
  switch (level) {
    case simd_level::scalar: return scalar::attention;
    case simd_level::avx2: return avx2::attention;
    case simd_level::avx512: return avx512::attention;
  }
  return scalar::attention;
}

void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end) {
  static const attention_fn fn = attention_for(active_kernels().level);
  fn(s, kv, rows, n_rows, head_begin, head_end);
}

}  // namespace strata::kernels
