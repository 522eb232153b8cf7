#include "src/model/attention_sinks.hpp"

#include <cmath>

#include "kernels/ops.hpp"

namespace strata::model {

void apply_attention_sinks(const tensor_view& sinks, const hparams& h, const float* lse, float* attn, std::int64_t r0, std::int64_t r1) {
  const float* sink = sinks.f32();
  for (std::int64_t r = r0; r < r1; ++r)
    for (int hh = 0; hh < h.n_head; ++hh) {
      const float keep = 1.0f / (1.0f + std::exp(sink[hh] - lse[r * h.n_head + hh]));
      kernels::scale(attn + r * h.q_dim() + hh * h.head_dim, h.head_dim, keep);
    }
}

}  // namespace strata::model
