// The mixture-of-experts block: routing, and the grouped path (rows gathered by expert, each
// expert's matrices read once per batch) against the per-token reference.

#include "src/model/moe_ffn.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quants.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

/// The grouped block against the reference, relative to the largest output: f32 experts differ
/// only in the order of float sums; q8_0 experts also round the activations to 8 bits.
constexpr double k_f32_vs_reference = 1e-4;
constexpr double k_q8_0_vs_reference = 2e-2;

/// Random weights of one mixture-of-experts layer, owned here, with views into them.
struct moe_layer {
  std::vector<std::vector<std::byte>> buffers;
  layer_weights w;

  tensor_view make(kernels::dtype t, std::int64_t cols, std::int64_t rows, float stddev, std::mt19937& gen) {
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> values(static_cast<std::size_t>(cols));
    const std::size_t stride = kernels::row_bytes(t, cols);
    std::vector<std::byte>& b = buffers.emplace_back(stride * static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (float& v : values) v = dist(gen);
      kernels::quantize_row(t, values.data(), b.data() + static_cast<std::size_t>(r) * stride, cols);
    }
    return tensor_view{t, b.data(), cols, rows};
  }

  moe_layer(const hparams& h, kernels::dtype t, bool biases, std::mt19937& gen) {
    buffers.reserve(16);
    const std::int64_t d = h.n_embd, ff = h.n_ff_exp, ne = h.n_expert;
    w.router = make(kernels::dtype::f32, d, ne, 0.3f, gen);
    w.gate_exps = make(t, d, ff * ne, 0.15f, gen);
    w.up_exps = make(t, d, ff * ne, 0.15f, gen);
    w.down_exps = make(t, ff, d * ne, 0.15f, gen);
    if (!biases) return;
    w.router_b = make(kernels::dtype::f32, ne, 1, 0.3f, gen);
    w.gate_exps_b = make(kernels::dtype::f32, ff, ne, 0.3f, gen);
    w.up_exps_b = make(kernels::dtype::f32, ff, ne, 0.3f, gen);
    w.down_exps_b = make(kernels::dtype::f32, d, ne, 0.3f, gen);
  }
};

hparams moe_hparams(bool gpt_oss) {
  hparams h;
  h.architecture = gpt_oss ? arch::gpt_oss : arch::qwen3moe;
  h.n_embd = 64;
  h.n_ff_exp = 32;
  h.n_expert = 8;
  h.n_expert_used = 3;
  h.router_softmax_after_topk = gpt_oss;
  h.swiglu_oai = gpt_oss;
  return h;
}

TEST(moe_ffn, route_keeps_the_best_experts_with_weights_that_sum_to_one) {
  for (bool gpt_oss : {false, true}) {
    const hparams h = moe_hparams(gpt_oss);
    const float logits[] = {0.1f, 2.0f, -1.0f, 1.5f, 0.0f, 3.0f, -2.0f, 0.5f};
    std::int32_t experts[3];
    float weights[3];
    route(h, logits, experts, weights);
    EXPECT_EQ(experts[0], 5);
    EXPECT_EQ(experts[1], 1);
    EXPECT_EQ(experts[2], 3);
    // Either way: the softmax of the chosen logits.
    const double z = std::exp(3.0) + std::exp(2.0) + std::exp(1.5);
    EXPECT_NEAR(weights[0], std::exp(3.0) / z, 1e-6);
    EXPECT_NEAR(weights[1], std::exp(2.0) / z, 1e-6);
    EXPECT_NEAR(weights[2], std::exp(1.5) / z, 1e-6);
  }
}

TEST(moe_ffn, grouped_experts_match_one_token_and_one_expert_at_a_time) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  kernels::compute_pool pool(2);
  for (bool gpt_oss : {false, true}) {
    for (kernels::dtype t : {kernels::dtype::f32, kernels::dtype::q8_0}) {
      const hparams h = moe_hparams(gpt_oss);
      moe_layer layer(h, t, gpt_oss, gen);
      // One decode row, a few rows, and a prefill-sized batch in which experts have many rows.
      for (std::int64_t n : {1, 5, 70}) {
        std::vector<float> x(static_cast<std::size_t>(n * h.n_embd));
        for (float& v : x) v = dist(gen);
        std::vector<float> got(x.size()), want(x.size());
        moe_ffn(layer.w, h, x.data(), n, got.data(), pool);
        moe_ffn_reference(layer.w, h, x.data(), n, want.data());
        double scale = 0;
        for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
        const double tol = (t == kernels::dtype::f32 ? k_f32_vs_reference : k_q8_0_vs_reference) * scale;
        for (std::size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], tol) << (gpt_oss ? "gpt-oss " : "qwen3moe ") << kernels::dtype_name(t) << " n " << n << " at " << i
                                            << " seed " << seed;
      }
    }
  }
}

TEST(moe_ffn, a_token_gets_the_same_output_alone_or_in_a_batch) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  kernels::compute_pool pool(2);
  const hparams h = moe_hparams(false);
  moe_layer layer(h, kernels::dtype::q8_0, false, gen);
  const std::int64_t n = 9;
  std::vector<float> x(static_cast<std::size_t>(n * h.n_embd)), batch(x.size()), alone(static_cast<std::size_t>(h.n_embd));
  for (float& v : x) v = dist(gen);
  moe_ffn(layer.w, h, x.data(), n, batch.data(), pool);
  for (std::int64_t i = 0; i < n; ++i) {
    moe_ffn(layer.w, h, x.data() + i * h.n_embd, 1, alone.data(), pool);
    for (std::int64_t c = 0; c < h.n_embd; ++c)
      ASSERT_EQ(alone[static_cast<std::size_t>(c)], batch[static_cast<std::size_t>(i * h.n_embd + c)]) << "row " << i << " seed " << seed;
  }
}

}  // namespace
}  // namespace strata::model
