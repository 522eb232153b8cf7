// The mixture-of-experts block: routing, and the grouped path (rows gathered by expert, each
// expert's matrices read once per batch) against the per-token reference.

#include "src/model/moe_ffn.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/packed_x16.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

/// The grouped block against the reference that rounds activations as the kernels do, relative
/// to the largest output. The order of the float sums differs, and with it, here and there, a
/// hidden activation lands on the other side of an 8-bit rounding step: one step of an activation
/// moves an output by up to 0.3% of the largest over 300 seeds (gpt-oss, q8_0; K-quants 0.15%).
constexpr double k_vs_reference = 1e-2;

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

  /// Gives each stacked expert tensor a packed copy (each expert's matrix packed on its own, as
  /// the model's load does) where this CPU has the type's packed kernel; false if it has none.
  bool pack(const hparams& h) {
    for (tensor_view* t : {&w.gate_exps, &w.up_exps, &w.down_exps}) {
      if (!kernels::x16_packable(t->type) || !kernels::active_kernels().packed_gemm[kernels::dtype_slot(t->type)]) return false;
      t->experts = h.n_expert;
      const std::int64_t rows = t->rows / t->experts;
      const std::size_t one = kernels::row_bytes(t->type, t->cols) * static_cast<std::size_t>(rows);
      std::vector<std::byte>& b = buffers.emplace_back(one * static_cast<std::size_t>(t->experts));
      for (std::int64_t e = 0; e < t->experts; ++e)
        kernels::pack_x16(t->type, static_cast<const std::byte*>(t->data) + static_cast<std::size_t>(e) * one, rows, t->cols,
                          b.data() + static_cast<std::size_t>(e) * one);
      t->packed = b.data();
    }
    return true;
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
        moe_ffn_reference(layer.w, h, x.data(), n, want.data(), /*round_activations=*/true);
        double scale = 0;
        for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
        for (std::size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], k_vs_reference * scale) << (gpt_oss ? "gpt-oss " : "qwen3moe ") << kernels::dtype_name(t) << " n " << n << " at " << i
                                            << " seed " << seed;
      }
    }
  }
}

/// Runs the batch x (n rows) through the layer at once, then each row alone: every output bit
/// must agree, and the batch must stay near the reference.
void expect_batch_invariant(const moe_layer& layer, const hparams& h, std::int64_t n, std::mt19937& gen, const std::string& what) {
  kernels::compute_pool pool(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n * h.n_embd)), batch(x.size()), want(x.size()), alone(static_cast<std::size_t>(h.n_embd));
  for (float& v : x) v = dist(gen);
  moe_ffn(layer.w, h, x.data(), n, batch.data(), pool);
  for (std::int64_t i = 0; i < n; ++i) {
    moe_ffn(layer.w, h, x.data() + i * h.n_embd, 1, alone.data(), pool);
    for (std::int64_t c = 0; c < h.n_embd; ++c)
      ASSERT_EQ(alone[static_cast<std::size_t>(c)], batch[static_cast<std::size_t>(i * h.n_embd + c)]) << what << " row " << i;
  }
  moe_ffn_reference(layer.w, h, x.data(), n, want.data(), /*round_activations=*/true);
  double scale = 0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(batch[i], want[i], k_vs_reference * scale) << what << " at " << i;
}

TEST(moe_ffn, a_token_gets_the_same_output_alone_or_in_a_batch) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const hparams h = moe_hparams(false);
  const moe_layer layer(h, kernels::dtype::q8_0, false, gen);
  expect_batch_invariant(layer, h, 9, gen, "q8_0 seed " + std::to_string(seed));
}

/// Experts packed 16 rows at a time (q8_0, q4_K, q6_K, mxfp4, as the model's load packs them): decode
/// rows and prefill rows of an expert go through the same packed kernel, so a token's output is the
/// same bits alone and among 40 tokens that share its experts.
TEST(moe_ffn, packed_experts_give_a_token_the_same_output_alone_or_in_a_batch) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  hparams h = moe_hparams(false);
  h.n_embd = 256;  // a K-quant super-block
  h.n_ff_exp = 256;
  for (kernels::dtype t : {kernels::dtype::q8_0, kernels::dtype::q4_k, kernels::dtype::q6_k, kernels::dtype::mxfp4}) {
    moe_layer layer(h, t, false, gen);
    if (!layer.pack(h)) GTEST_SKIP() << "no packed kernels on this CPU";
    expect_batch_invariant(layer, h, 40, gen, std::string(kernels::dtype_name(t)) + " seed " + std::to_string(seed));
  }
  // gpt-oss: MXFP4 experts with biases and the clamped SwiGLU.
  hparams g = moe_hparams(true);
  g.n_embd = h.n_embd;
  g.n_ff_exp = h.n_ff_exp;
  moe_layer layer(g, kernels::dtype::mxfp4, true, gen);
  ASSERT_TRUE(layer.pack(g));
  expect_batch_invariant(layer, g, 40, gen, "gpt-oss mxfp4 seed " + std::to_string(seed));
}

}  // namespace
}  // namespace strata::model
