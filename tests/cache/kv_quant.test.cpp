// Quantized KV against f16 KV on every shared model: the mean KL divergence of the next-token
// distribution over the long prompt of ../shared/golden/prompts.txt, for q8_0, q4_0 with the
// rotation of keys and queries, and q4_0 without it.
//
// The rotation spreads outlier channels of the keys over their quantization block (see
// kernels/ops.test.cpp, where keys with outlier channels lose more than half their q4_0 error).
// The shared models have random weights: their keys are close to Gaussian in every channel, with
// no outliers to spread, so here the rotation buys only a few percent. This test checks that it
// never hurts and prints what it buys.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "tests/cache/harness.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata {
namespace {

#define k_shared std::string(STRATA_SHARED_DIR)

/// Bounds on the mean KL divergence (nats) against f16 KV. q8_0 keeps 8 bits per value with a
/// scale per 32; q4_0 keeps 4.
/// (Measured on these models: q8_0 at most 2.5e-3, q4_0 at most 6.2e-2; the bounds leave room for
/// other prompts' tokenizations and SIMD levels.)
constexpr double k_q8_max_kl = 5e-3;
constexpr double k_q4_max_kl = 0.1;

std::string long_prompt() {
  std::ifstream in(k_shared + "/golden/prompts.txt");
  std::string line, longest;
  while (std::getline(in, line))
    if (line.size() > longest.size()) longest = line;
  // "\n" inside a line stands for a newline.
  for (std::size_t at = 0; (at = longest.find("\\n", at)) != std::string::npos;) longest.replace(at, 2, "\n");
  return longest;
}

/// Mean over positions of KL(p || q), p and q the softmax of two logit rows.
double mean_kl(const std::vector<float>& ref, const std::vector<float>& got, std::int32_t n_vocab) {
  const std::size_t rows = ref.size() / static_cast<std::size_t>(n_vocab);
  double total = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* a = ref.data() + r * static_cast<std::size_t>(n_vocab);
    const float* b = got.data() + r * static_cast<std::size_t>(n_vocab);
    const double ma = *std::max_element(a, a + n_vocab), mb = *std::max_element(b, b + n_vocab);
    double za = 0, zb = 0;
    for (std::int32_t i = 0; i < n_vocab; ++i) {
      za += std::exp(a[i] - ma);
      zb += std::exp(b[i] - mb);
    }
    const double la = ma + std::log(za), lb = mb + std::log(zb);
    double kl = 0;
    for (std::int32_t i = 0; i < n_vocab; ++i) {
      const double lpa = a[i] - la, lpb = b[i] - lb;
      kl += std::exp(lpa) * (lpa - lpb);
    }
    total += kl;
  }
  return total / static_cast<double>(rows);
}

class kv_quant : public ::testing::TestWithParam<std::string> {};

TEST_P(kv_quant, quantized_kv_stays_close_to_f16_and_the_rotation_never_hurts) {
  auto m = model::model::load(k_shared + "/models/" + GetParam() + ".gguf");
  ASSERT_TRUE(m) << m.err().message;
  auto tok = tokenizer::tokenizer::from_gguf((*m)->file);
  ASSERT_TRUE(tok) << tok.err().message;
  const auto tokens = tok->encode(long_prompt(), true, true);
  ASSERT_GT(tokens.size(), 100u);
  const std::int32_t n_vocab = (*m)->hp.n_vocab;
  kernels::compute_pool pool(2);
  const auto n = static_cast<std::int32_t>(tokens.size());
  auto run = [&](kv::kv_format f, bool rotate) {
    model::session s(*m, pool, n, 32, 512, f);
    s.set_rotate_q4(rotate);
    // In chunks, so later rows read earlier chunks' quantized KV; the distribution of every 4th
    // position (the LM head over all of them would cost more than the rest of the test).
    auto r = s.append(tokens, true, 64, 4);
    EXPECT_TRUE(r) << r.err().message;
    return r ? *r : std::vector<float>{};
  };
  const auto ref = run(kv::kv_format::f16, true);
  const double q8 = mean_kl(ref, run(kv::kv_format::q8_0, true), n_vocab);
  const double q4 = mean_kl(ref, run(kv::kv_format::q4_0, true), n_vocab);
  const double q4_plain = mean_kl(ref, run(kv::kv_format::q4_0, false), n_vocab);
  std::printf("%-26s %4d tokens: mean KL vs f16 KV: q8_0 %.2e, q4_0 rotated %.2e, q4_0 plain %.2e (rotation: %.2fx less)\n",
              GetParam().c_str(), n, q8, q4, q4_plain, q4_plain / q4);
  EXPECT_LT(q8, k_q8_max_kl);
  EXPECT_LT(q4, k_q4_max_kl);
  EXPECT_LE(q4, 1.02 * q4_plain) << "the rotation made q4_0 worse";
}

INSTANTIATE_TEST_SUITE_P(shared_models, kv_quant,
                         ::testing::Values("tiny-llama-spm-f16", "tiny-qwen2-gpt2-f16", "tiny-qwen3-starcoder-f16",
                                           "tiny-gemma2-spm-f16", "small-llama-spm-q8_0", "small-llama-spm-q4_0",
                                           "small-llama-spm-q4_k_m", "small-llama-spm-q5_k_m", "small-llama-spm-q6_k"),
                         cache_test::model_test_name);

}  // namespace
}  // namespace strata
