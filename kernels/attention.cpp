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

void merge_attention(const float* const* outs, const float* const* lses, int n_parts, int n_head, int head_dim, float* out,
                     float* lse) {
  for (int h = 0; h < n_head; ++h) {
    float m = -__builtin_inff();
    for (int i = 0; i < n_parts; ++i) m = lses[i][h] > m ? lses[i][h] : m;
    float w[k_attention_merge_max_parts], total = 0.0f;
    for (int i = 0; i < n_parts; ++i) total += w[i] = m == -__builtin_inff() ? 0.0f : __builtin_expf(lses[i][h] - m);
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const std::int64_t o = static_cast<std::int64_t>(h) * head_dim;
    for (int d = 0; d < head_dim; ++d) {
      float acc = 0.0f;
      for (int i = 0; i < n_parts; ++i) acc += w[i] * outs[i][o + d];
      out[o + d] = acc * inv;
    }
    if (lse) lse[h] = total > 0.0f ? m + __builtin_logf(total) : -__builtin_inff();
  }
}

void fold_attention(float* out, float* lse, const float* part, const float* part_lse, int n_head, int head_dim) {
  const float* outs[] = {out, part};
  const float* lses[] = {lse, part_lse};
  merge_attention(outs, lses, 2, n_head, head_dim, out, lse);
}

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
