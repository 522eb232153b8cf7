// Every model in ../shared/models against the exact float32 reference logits in ../shared/golden,
// with the tolerance its manifest gives (see ../shared/golden/README.md for the comparison).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>

#include <boost/json.hpp>

#include "kernels/compute_pool.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"
#include "src/tokenizer/tokenizer.hpp"
#include "tests/golden/param_name.hpp"
#include "tests/golden/synth_model.hpp"

namespace strata::model {
namespace {

namespace json = boost::json;

// A macro, not a static string: the test list is built during static initialization.
#define k_shared std::string(STRATA_SHARED_DIR)

json::value read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

struct errors {
  double max_abs = 0, sum_abs = 0;
  std::size_t compared = 0, missing = 0;
};

/// Compares one position: the reference top-20 against our logits, counting reference entries
/// missing from our own top-20.
void compare_position(const json::object& ref, const float* logits, std::int32_t n_vocab, errors& e) {
  const auto& top = ref.at("top").as_array();
  std::vector<std::int32_t> idx(static_cast<std::size_t>(n_vocab));
  std::iota(idx.begin(), idx.end(), 0);
  const std::size_t k = top.size();
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
  for (const auto& entry : top) {
    auto token = static_cast<std::int32_t>(entry.as_array()[0].to_number<double>());
    double want = entry.as_array()[1].to_number<double>();
    if (std::find(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), token) == idx.begin() + static_cast<std::ptrdiff_t>(k)) {
      ++e.missing;
      continue;
    }
    double diff = std::fabs(static_cast<double>(logits[token]) - want);
    e.max_abs = std::max(e.max_abs, diff);
    e.sum_abs += diff;
    ++e.compared;
  }
}

class golden : public ::testing::TestWithParam<std::string> {};

TEST_P(golden, logits_are_within_the_manifest_tolerance_of_the_reference) {
  const std::string name = GetParam();
  json::value manifest = read_json(k_shared + "/golden/manifest.json");
  const auto& entry = manifest.at("models").at(name).as_object();
  const double tol_max = entry.at("tolerance").at("max_abs").to_number<double>();
  const double tol_mean = entry.at("tolerance").at("mean_abs").to_number<double>();
  auto m = model::load(k_shared + "/" + std::string(entry.at("file").as_string()));
  ASSERT_TRUE(m) << m.err().message;
  json::value ref = read_json(k_shared + "/golden/" + name + ".ref.json");
  ASSERT_EQ(ref.at("n_vocab").to_number<std::int64_t>(), (*m)->hp.n_vocab);

  kernels::compute_pool pool(2);
  errors e;
  double max_lse = 0;
  for (const auto& c : ref.at("cases").as_array()) {
    std::vector<std::int32_t> tokens;
    for (const auto& t : c.at("tokens").as_array()) tokens.push_back(static_cast<std::int32_t>(t.to_number<std::int64_t>()));
    session s(*m, pool, static_cast<std::int32_t>(tokens.size()) + 32);
    // Chunks of 64 exercise the KV written by earlier chunks.
    auto logits = s.append(tokens, true, 64);
    ASSERT_TRUE(logits) << logits.err().message;
    const auto& positions = c.at("positions").as_array();
    ASSERT_EQ(positions.size(), tokens.size());
    const std::int32_t nv = (*m)->hp.n_vocab;
    for (std::size_t p = 0; p < positions.size(); ++p) {
      const float* row = logits->data() + p * static_cast<std::size_t>(nv);
      compare_position(positions[p].as_object(), row, nv, e);
      double mx = *std::max_element(row, row + nv), sum = 0;
      for (std::int32_t i = 0; i < nv; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
      max_lse = std::max(max_lse, std::fabs(mx + std::log(sum) - positions[p].at("logsumexp").to_number<double>()));
    }
  }
  const double mean = e.sum_abs / static_cast<double>(std::max<std::size_t>(1, e.compared));
  const double missing = static_cast<double>(e.missing) / static_cast<double>(e.missing + e.compared);
  std::printf("%-28s max_abs %.6f  mean_abs %.7f  missing %.1f%%  logsumexp max diff %.6f  (tolerance %.4g / %.4g)\n", name.c_str(),
              e.max_abs, mean, 100 * missing, max_lse, tol_max, tol_mean);
  EXPECT_GT(e.compared, 0u);
  EXPECT_LE(e.max_abs, tol_max);
  EXPECT_LE(mean, tol_mean);
  EXPECT_LE(missing, 0.2);
  EXPECT_LE(max_lse, 10 * tol_max);
}

// The golden test above takes its tokens from the reference, so that it does not depend on the
// tokenizer; this one checks that the tokenizer gives those same tokens from the prompt text.
TEST_P(golden, tokenizer_gives_the_reference_tokens) {
  const std::string name = GetParam();
  json::value manifest = read_json(k_shared + "/golden/manifest.json");
  auto f = gguf_file::open(k_shared + "/" + std::string(manifest.at("models").at(name).at("file").as_string()));
  ASSERT_TRUE(f) << f.err().message;
  auto tok = tokenizer::tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok) << tok.err().message;
  json::value ref = read_json(k_shared + "/golden/" + name + ".ref.json");
  for (const auto& c : ref.at("cases").as_array()) {
    std::vector<std::int32_t> want;
    for (const auto& t : c.at("tokens").as_array()) want.push_back(static_cast<std::int32_t>(t.to_number<std::int64_t>()));
    EXPECT_EQ(tok->encode(std::string(c.at("prompt").as_string()), true, true), want) << c.at("prompt").as_string();
  }
}

/// The random-weight models of tests/golden/synth against llama.cpp's logits for the same file:
/// every prompt position (prefill in chunks of 64, across the delta rule's chunks and the experts'
/// grouped batches), within the tolerance of the shared tiny models; then llama.cpp's greedy
/// continuation fed back one token at a time (the decode step), where each step's top token must
/// be llama.cpp's next one wherever the two best are further apart than twice that tolerance.
class golden_synth : public ::testing::TestWithParam<std::string> {};

TEST_P(golden_synth, logits_are_within_the_tolerance_of_llama_cpp) {
  constexpr double tol_max = 0.01, tol_mean = 0.002;
  const std::string arch = GetParam();
  const std::string file = golden_testing::synth_model(arch, k_shared);
  ASSERT_FALSE(file.empty());
  auto m = model::load(file);
  ASSERT_TRUE(m) << m.err().message;
  json::value ref = read_json("tests/golden/synth/" + arch + ".llamacpp.json");
  const std::int32_t nv = (*m)->hp.n_vocab;
  ASSERT_EQ(ref.at("n_vocab").to_number<std::int64_t>(), nv);
  kernels::compute_pool pool(2);
  errors e;
  std::size_t decode_steps = 0, decode_disagree = 0;
  for (const auto& c : ref.at("cases").as_array()) {
    std::vector<std::int32_t> tokens;
    for (const auto& t : c.at("tokens").as_array()) tokens.push_back(static_cast<std::int32_t>(t.to_number<std::int64_t>()));
    const auto& greedy = c.at("greedy").as_array();
    session s(*m, pool, static_cast<std::int32_t>(tokens.size() + greedy.size()) + 8);
    auto logits = s.append(tokens, true, 64);
    ASSERT_TRUE(logits) << logits.err().message;
    const auto& positions = c.at("positions").as_array();
    for (std::size_t p = 0; p < positions.size(); ++p)
      compare_position(positions[p].as_object(), logits->data() + p * static_cast<std::size_t>(nv), nv, e);
    std::vector<float> last(logits->end() - nv, logits->end());
    for (std::size_t g = 0; g < greedy.size(); ++g) {
      const auto want = static_cast<std::int32_t>(greedy[g].to_number<std::int64_t>());
      std::vector<float> sorted = last;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const auto top = static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      if (sorted[0] - sorted[1] > 2 * tol_max) {
        ++decode_steps;
        if (top != want) ++decode_disagree;
      }
      auto next = s.append(std::span<const std::int32_t>(&want, 1), false);
      ASSERT_TRUE(next) << next.err().message;
      last = *next;
    }
  }
  const double mean = e.sum_abs / static_cast<double>(std::max<std::size_t>(1, e.compared));
  const double missing = static_cast<double>(e.missing) / static_cast<double>(e.missing + e.compared);
  std::printf("synth %s max_abs %.6f  mean_abs %.7f  missing %.1f%%  greedy steps compared %zu, disagreeing %zu\n", arch.c_str(),
              e.max_abs, mean, 100 * missing, decode_steps, decode_disagree);
  EXPECT_GT(e.compared, 0u);
  EXPECT_LE(e.max_abs, tol_max);
  EXPECT_LE(mean, tol_mean);
  EXPECT_LE(missing, 0.2);
  EXPECT_GT(decode_steps, 0u);
  EXPECT_EQ(decode_disagree, 0u);
}

std::vector<std::string> manifest_models() {
  std::vector<std::string> out;
  json::value manifest = read_json(k_shared + "/golden/manifest.json");
  for (const auto& kv : manifest.at("models").as_object()) out.emplace_back(kv.key());
  return out;
}

INSTANTIATE_TEST_SUITE_P(synth, golden_synth, ::testing::Values("qwen35", "qwen3moe", "gpt-oss", "granitehybrid"),
                         golden_testing::model_param_name);

INSTANTIATE_TEST_SUITE_P(shared_models, golden, ::testing::ValuesIn(manifest_models()),
                         golden_testing::model_param_name);

}  // namespace
}  // namespace strata::model
