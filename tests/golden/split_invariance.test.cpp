// A prompt's logits must not depend on how it was split into steps: the prefix cache reuses KV
// that one request computed (its prompt in prefill chunks, its reply one token at a time) for a
// later request that would otherwise compute the same positions in other chunks. Each shared model
// and KV format runs one token sequence three ways, in one chunk, as a prefix and a suffix in
// chunks of other sizes, and as a prefill followed by one token per step (past two attention
// spans, where a decode row is split over the workers), and every position's logits must be the
// same bits.

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "src/kv/kv_format.hpp"
#include "src/model/model.hpp"
#include "src/model/q4_kv.hpp"
#include "src/model/session.hpp"
#include "tests/golden/param_name.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

#define k_shared std::string(STRATA_SHARED_DIR)

constexpr std::int32_t k_tokens = 600;  // past two spans of 256 positions
constexpr std::int32_t k_page = 16;     // the cache tests' block size

class split_invariance : public ::testing::TestWithParam<std::string> {};

/// Every position's logits of `tokens` appended in the given runs, each run in chunks of its size
/// (a run of size 1 is decode: one token per step).
/// q4_0 pages are centered with `means` when set.
std::vector<float> logits_in_runs(const std::shared_ptr<const model>& m, kernels::compute_pool& pool, kv::kv_format format,
                                  const std::vector<std::int32_t>& tokens, const std::vector<std::pair<std::int32_t, std::int32_t>>& runs,
                                  const q4_key_means* means = nullptr) {
  session s(m, pool, k_tokens + 8, k_page, 512, format);
  s.set_q4_key_means(means);
  std::vector<float> all;
  std::size_t at = 0;
  for (const auto& [length, chunk] : runs) {
    if (chunk == 1) {
      for (std::int32_t i = 0; i < length; ++i, ++at) {
        auto r = s.append(std::span(tokens).subspan(at, 1), true, 1);
        EXPECT_TRUE(r);
        if (!r) return {};
        all.insert(all.end(), r->begin(), r->end());
      }
      continue;
    }
    auto r = s.append(std::span(tokens).subspan(at, static_cast<std::size_t>(length)), true, chunk);
    EXPECT_TRUE(r);
    if (!r) return {};
    all.insert(all.end(), r->begin(), r->end());
    at += static_cast<std::size_t>(length);
  }
  return all;
}

TEST_P(split_invariance, a_prompt_gets_the_same_logits_however_its_steps_split_it) {
  auto m = model::load(k_shared + "/models/" + GetParam() + ".gguf");
  ASSERT_TRUE(m) << m.err().message;
  const unsigned seed = test_seed();
  std::mt19937 rng(seed);
  std::vector<std::int32_t> tokens(k_tokens);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>((*m)->hp.n_vocab));
  kernels::compute_pool pool(2);
  const std::int64_t vocab = (*m)->hp.n_vocab;
  // Mean keys from the prompt's first 64 tokens: any m must give the same bits for every split.
  auto means = calibrate_q4_keys(*m, pool, std::span(tokens).first(64));
  ASSERT_TRUE(means) << means.err().message;
  for (kv::kv_format format : kv::k_kv_formats) {
    for (const q4_key_means* centering : {static_cast<const q4_key_means*>(nullptr), static_cast<const q4_key_means*>(&*means)}) {
      if (centering && format != kv::kv_format::q4_0) continue;
      const auto whole = logits_in_runs(*m, pool, format, tokens, {{k_tokens, 512}}, centering);
      const std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> splits = {
          {{37, 37}, {k_tokens - 37, 48}},         // a cached prefix, then the rest in the cache tests' chunks
          {{200, 7}, {300, 64}, {100, 13}},        // odd chunk sizes
          {{520, 512}, {k_tokens - 520, 1}},        // decode past two spans: rows split over the workers
      };
      for (const auto& split : splits) {
        const auto got = logits_in_runs(*m, pool, format, tokens, split, centering);
        ASSERT_EQ(got.size(), whole.size());
        std::size_t i = 0;
        while (i < got.size() && std::memcmp(&got[i], &whole[i], sizeof(float)) == 0) ++i;
        std::string runs;
        for (const auto& [length, chunk] : split) runs += " " + std::to_string(length) + "/" + std::to_string(chunk);
        EXPECT_EQ(i, got.size()) << GetParam() << " " << "kv_bits " << static_cast<int>(format) << (centering ? " centered" : "")
                                 << " runs (length/chunk)" << runs << ": position " << i / static_cast<std::size_t>(vocab) << " differs first ("
                                 << whole[i] << " vs " << got[i] << "), seed " << seed;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, split_invariance,
                         ::testing::Values("tiny-llama-spm-f16", "tiny-qwen2-gpt2-f16", "tiny-qwen3-starcoder-f16",
                                           "tiny-gemma2-spm-f16", "small-llama-spm-q8_0", "small-llama-spm-q4_0",
                                           "small-llama-spm-q4_k_m", "small-llama-spm-q5_k_m", "small-llama-spm-q6_k"),
                         golden_testing::model_param_name);

}  // namespace
}  // namespace strata::model
