#include "src/sampling/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "tests/support/test_seed.hpp"

namespace strata::sampling {
namespace {

constexpr int draws = 20000;

/// softmax(logits / t) restricted to `allowed` (every token when empty), in long double.
std::vector<double> reference_probs(const std::vector<float>& logits, double t, const std::vector<bool>& allowed = {}) {
  std::vector<double> p(logits.size(), 0.0);
  long double z = 0;
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (allowed.empty() || allowed[i]) z += p[i] = static_cast<double>(std::exp(static_cast<long double>(logits[i]) / t));
  for (double& x : p) x = static_cast<double>(x / z);
  return p;
}

/// Counts `draws` tokens from a sampler on fresh copies of the logits.
std::vector<int> histogram(sampler& s, const std::vector<float>& logits) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    auto l = logits;
    ++counts[static_cast<std::size_t>(s.draw(l.data(), static_cast<std::int32_t>(l.size())).token)];
  }
  return counts;
}

/// Each bucket within 5 binomial standard deviations of its expectation; impossible tokens never.
void expect_matches(const std::vector<int>& counts, const std::vector<double>& p) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " lies outside the allowed set";
      continue;
    }
    const double mean = draws * p[i];
    const double sd = std::sqrt(draws * p[i] * (1 - p[i]));
    EXPECT_NEAR(counts[i], mean, 5 * sd + 1) << "token " << i;
  }
}

/// Pearson's chi-square statistic below df + 6 sqrt(2 df) (about 6 sigma of its normal limit).
void expect_chi_square_fits(const std::vector<int>& counts, const std::vector<double>& p) {
  double chi = 0;
  int df = -1;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " lies outside the allowed set";
      continue;
    }
    const double e = draws * p[i];
    chi += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  EXPECT_LT(chi, df + 6 * std::sqrt(2.0 * df)) << "df " << df;
}

/// The nucleus by its definition: the fewest most likely tokens whose probability reaches top_p.
std::vector<bool> reference_nucleus(const std::vector<float>& logits, double top_p) {
  auto p = reference_probs(logits, 1.0);
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  std::vector<bool> in(p.size(), false);
  double cum = 0;
  for (std::size_t i : order) {
    in[i] = true;
    cum += p[i];
    if (cum >= top_p) break;
  }
  return in;
}

TEST(sampler, temperature_zero_is_the_argmax_whatever_the_truncation) {
  std::mt19937 rng(test_seed());
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int round = 0; round < 50; ++round) {
    std::vector<float> logits(1 + rng() % 2000);
    for (float& x : logits) x = nd(rng);
    const auto want = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    sampler s({.temperature = 0.0f, .top_p = 0.3f, .top_k = 5, .min_p = 0.5f, .seed = rng()}, {});
    EXPECT_EQ(s.draw(logits.data(), static_cast<std::int32_t>(logits.size())).token, want);
  }
}

TEST(sampler, draws_follow_the_softmax_at_each_temperature) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
  for (float t : {0.3f, 0.7f, 1.0f, 1.6f}) {
    sampler s({.temperature = t, .seed = 11}, {});
    SCOPED_TRACE(t);
    expect_matches(histogram(s, logits), reference_probs(logits, t));
  }
}

TEST(sampler, top_k_draws_follow_the_renormalized_k_most_likely) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 1.4f, 0.3f, -2.0f, 1.0f};
  sampler s({.temperature = 1.3f, .top_k = 3, .seed = 12}, {});
  expect_matches(histogram(s, logits), reference_probs(logits, 1.3, {false, true, false, true, true, false, false, false}));
}

TEST(sampler, top_p_draws_follow_the_renormalized_nucleus) {
  // At temperature 1: p = .47 .26 .17 .06 .04 ...: 0.8 needs the first three.
  const std::vector<float> logits = {3.0f, 2.4f, 2.0f, 1.0f, 0.5f, -1.0f, -2.0f};
  const auto nucleus = reference_nucleus(logits, 0.8);
  ASSERT_EQ(std::count(nucleus.begin(), nucleus.end(), true), 3);
  sampler s({.temperature = 0.8f, .top_p = 0.8f, .seed = 13}, {});
  expect_matches(histogram(s, logits), reference_probs(logits, 0.8, nucleus));
}

TEST(sampler, min_p_draws_follow_the_tokens_near_the_most_likely) {
  // min_p 0.3 keeps p_i >= 0.3 p_max, i.e. logits >= 2 + ln 0.3 = 0.796.
  const std::vector<float> logits = {2.0f, 0.9f, 0.7f, 1.5f, -1.0f, 0.8f};
  sampler s({.temperature = 1.5f, .min_p = 0.3f, .seed = 14}, {});
  expect_matches(histogram(s, logits), reference_probs(logits, 1.5, {true, true, false, true, false, true}));
}

TEST(sampler, the_chain_applies_top_k_then_top_p_then_min_p_then_temperature) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.5f, 2.2f, 2.1f, 0.0f, 2.0f, -1.0f};
  // Each stage removes something: top_k 5 keeps {1,2,3,4,6}; among those (p = .35 .21 .16 .14
  // .13) top_p 0.75 keeps {1,2,3,4}; min_p 0.42 keeps logits >= 3 + ln 0.42 = 2.13: {1,2,3}.
  std::vector<float> top5 = {-1e9f, 3.0f, 2.5f, 2.2f, 2.1f, -1e9f, 2.0f, -1e9f};
  auto nucleus = reference_nucleus(top5, 0.75);
  std::vector<bool> allowed(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) allowed[i] = nucleus[i] && logits[i] >= 3.0f + std::log(0.42f);
  ASSERT_EQ(std::count(nucleus.begin(), nucleus.end(), true), 4);
  ASSERT_EQ(std::count(allowed.begin(), allowed.end(), true), 3);
  sampler s({.temperature = 0.9f, .top_p = 0.75f, .top_k = 5, .min_p = 0.42f, .seed = 15}, {});
  expect_matches(histogram(s, logits), reference_probs(logits, 0.9, allowed));
}

TEST(sampler, top_p_over_a_large_random_vocabulary_keeps_exactly_the_nucleus) {
  // A nucleus of some two hundred tokens out of 5,000: the selection has to grow past its first
  // chunk, and a chi-square over the nucleus checks the whole distribution.
  std::mt19937 rng(test_seed());
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> logits(5000);
  for (float& x : logits) x = nd(rng);
  for (int i = 0; i < 300; ++i) logits[rng() % logits.size()] = 9.0f + 0.3f * nd(rng);
  const double top_p = 0.6;
  const auto nucleus = reference_nucleus(logits, top_p);
  const auto size = std::count(nucleus.begin(), nucleus.end(), true);
  ASSERT_GT(size, 64);
  sampler s({.temperature = 1.0f, .top_p = static_cast<float>(top_p), .seed = rng()}, {});
  expect_chi_square_fits(histogram(s, logits), reference_probs(logits, 1.0, nucleus));
}

TEST(sampler, repetition_penalty_divides_positive_and_multiplies_negative_logits_in_the_window) {
  sampler s({.temperature = 0.0f, .repetition_penalty = 2.0f}, {1, 2, 1});
  std::vector<float> l = {1.0f, 4.0f, -1.0f, 9.0f};
  EXPECT_EQ(s.draw(l.data(), 4).token, 3);
  EXPECT_EQ(l, (std::vector<float>{1.0f, 2.0f, -2.0f, 9.0f}));  // once per token, however often seen
}

TEST(sampler, repetition_penalty_only_sees_the_last_n_tokens) {
  sampler s({.temperature = 0.0f, .repetition_penalty = 2.0f, .penalty_last_n = 2}, {5, 6, 7});
  std::vector<float> l(10, 1.0f);
  l[0] = 10.0f;  // token 0 wins and joins the window, pushing 6 out
  s.draw(l.data(), 10);
  EXPECT_EQ(l[5], 1.0f);
  EXPECT_EQ(l[6], 0.5f);
  EXPECT_EQ(l[7], 0.5f);
  std::vector<float> l2(10, 1.0f);
  s.draw(l2.data(), 10);
  EXPECT_EQ(l2[6], 1.0f);
  EXPECT_EQ(l2[7], 0.5f);
  EXPECT_EQ(l2[0], 0.5f);

  sampler whole({.temperature = 0.0f, .repetition_penalty = 0.5f, .penalty_last_n = -1}, {5, 6, 7});
  std::vector<float> l3(10, -1.0f);
  whole.draw(l3.data(), 10);
  EXPECT_EQ(l3[5], -0.5f);  // a penalty below 1 favours repeats
  EXPECT_EQ(l3[7], -0.5f);
}

TEST(sampler, presence_and_frequency_penalties_count_generated_tokens_only) {
  sampler s({.temperature = 0.0f, .presence_penalty = 0.5f, .frequency_penalty = 0.25f}, {4, 4, 4});
  s.accept(2);
  s.accept(2);
  s.accept(3);
  std::vector<float> l(5, 0.0f);
  s.draw(l.data(), 5);
  EXPECT_FLOAT_EQ(l[2], -(0.5f + 0.25f * 2));
  EXPECT_FLOAT_EQ(l[3], -(0.5f + 0.25f * 1));
  EXPECT_EQ(l[4], 0.0f);  // the prompt does not count
  EXPECT_EQ(l[0], 0.0f);

  sampler neg({.temperature = 0.0f, .presence_penalty = -1.0f, .frequency_penalty = -2.0f}, {});
  neg.accept(1);
  std::vector<float> l2 = {2.0f, 0.0f};
  EXPECT_EQ(neg.draw(l2.data(), 2).token, 1);  // 0 + 1 + 2 = 3 > 2
  EXPECT_FLOAT_EQ(l2[1], 3.0f);
}

TEST(sampler, repetition_applies_before_presence_and_frequency) {
  sampler s({.temperature = 0.0f, .presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 2.0f}, {1});
  std::vector<float> l = {1.0f, 4.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.draw(l.data(), 4).token, 3);
  EXPECT_FLOAT_EQ(l[1], 2.0f);  // only the prompt so far
  std::vector<float> l2 = {1.0f, 4.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.draw(l2.data(), 4).token, 1);
  EXPECT_FLOAT_EQ(l2[3], 3.0f / 2.0f - 0.5f - 0.25f);
  std::vector<float> l3 = {1.0f, 4.0f, -1.0f, 3.0f};
  s.draw(l3.data(), 4);
  EXPECT_FLOAT_EQ(l3[1], 4.0f / 2.0f - 0.5f - 0.25f);
}

TEST(sampler, logit_bias_adds_and_minus_100_bans) {
  sampler s({.temperature = 0.0f, .logit_bias = {{3, -100.0f}, {0, 2.5f}}}, {});
  std::vector<float> l = {1.0f, 3.0f, -1.0f, 90.0f};
  EXPECT_EQ(s.draw(l.data(), 4).token, 0);
  EXPECT_FLOAT_EQ(l[0], 3.5f);
  EXPECT_TRUE(std::isinf(l[3]) && l[3] < 0);

  const std::vector<float> base = {5.0f, 0.0f, 0.0f, 0.0f};
  sampler hot({.temperature = 2.0f, .seed = 3, .logit_bias = {{0, -100.0f}, {2, -100.0f}}}, {});
  auto counts = histogram(hot, base);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  expect_matches(counts, reference_probs(base, 2.0, {false, true, false, true}));
}

TEST(sampler, the_same_seed_gives_the_same_tokens_and_another_seed_others) {
  std::mt19937 rng(test_seed());
  std::normal_distribution<float> nd;
  std::vector<std::vector<float>> steps(64, std::vector<float>(500));
  for (auto& v : steps)
    for (float& x : v) x = nd(rng);
  for (auto params : {sampling_params{.temperature = 1.0f}, sampling_params{.temperature = 0.8f, .top_p = 0.9f},
                      sampling_params{.temperature = 1.2f, .top_k = 40, .min_p = 0.05f, .repetition_penalty = 1.1f}}) {
    auto run = [&](std::uint64_t seed) {
      auto p = params;
      p.seed = seed;
      sampler s(p, {1, 2, 3});
      std::vector<std::int32_t> out;
      for (auto l : steps) out.push_back(s.draw(l.data(), 500).token);
      return out;
    };
    EXPECT_EQ(run(42), run(42));
    EXPECT_NE(run(42), run(43));
  }
}

TEST(sampler, logprobs_are_the_log_softmax_of_the_raw_logits) {
  std::mt19937 rng(test_seed());
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int round = 0; round < 30; ++round) {
    const std::int32_t n = 100 + static_cast<std::int32_t>(rng() % 3000);
    std::vector<float> raw(static_cast<std::size_t>(n));
    for (float& x : raw) x = nd(rng);
    long double z = 0;
    const float mx = *std::max_element(raw.begin(), raw.end());
    for (float x : raw) z += std::exp(static_cast<long double>(x) - mx);
    auto logprob = [&](std::int32_t t) { return static_cast<double>(raw[static_cast<std::size_t>(t)] - mx - std::log(z)); };
    std::vector<std::int32_t> order(raw.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return raw[static_cast<std::size_t>(a)] > raw[static_cast<std::size_t>(b)]; });

    const std::int32_t top = static_cast<std::int32_t>(rng() % 21);
    // Bias and penalties change the draw, not the reported distribution.
    sampler s({.temperature = round % 2 ? 0.0f : 0.9f, .top_k = 50, .presence_penalty = 1.0f, .repetition_penalty = 1.3f,
               .seed = rng(), .logprobs = true, .top_logprobs = top, .logit_bias = {{order[0], -100.0f}, {order[5], 3.0f}}},
              {order[1], order[2]});
    for (int step = 0; step < 3; ++step) {
      auto l = raw;
      auto c = s.draw(l.data(), n);
      EXPECT_NE(c.token, order[0]);
      EXPECT_NEAR(c.logprob, logprob(c.token), 1e-4);
      ASSERT_EQ(c.top_logprobs.size(), static_cast<std::size_t>(top));
      for (std::size_t i = 0; i < c.top_logprobs.size(); ++i) {
        EXPECT_EQ(c.top_logprobs[i].first, order[i]);
        EXPECT_NEAR(c.top_logprobs[i].second, logprob(order[i]), 1e-4);
      }
    }
  }
}

TEST(sampler, every_out_of_range_parameter_is_named) {
  EXPECT_TRUE(sampling_params{}.validate());
  EXPECT_TRUE((sampling_params{.temperature = 2.0f, .top_p = 1.0f, .min_p = 1.0f, .presence_penalty = -2.0f,
                               .frequency_penalty = 2.0f, .repetition_penalty = 0.01f, .top_logprobs = 20}
                   .validate()));
  auto named = [](sampling_params p, const char* name) {
    auto r = p.validate(1000);
    return !r && r.err().code == errc::invalid_argument && r.err().message.find(name) != std::string::npos;
  };
  EXPECT_TRUE(named({.temperature = 2.5f}, "temperature"));
  EXPECT_TRUE(named({.temperature = -0.1f}, "temperature"));
  EXPECT_TRUE(named({.temperature = std::nanf("")}, "temperature"));
  EXPECT_TRUE(named({.top_p = 0.0f}, "top_p"));
  EXPECT_TRUE(named({.top_p = 1.01f}, "top_p"));
  EXPECT_TRUE(named({.top_k = -1}, "top_k"));
  EXPECT_TRUE(named({.min_p = 1.5f}, "min_p"));
  EXPECT_TRUE(named({.presence_penalty = 2.1f}, "presence_penalty"));
  EXPECT_TRUE(named({.frequency_penalty = -2.1f}, "frequency_penalty"));
  EXPECT_TRUE(named({.repetition_penalty = 0.0f}, "repetition_penalty"));
  EXPECT_TRUE(named({.penalty_last_n = -2}, "penalty_last_n"));
  EXPECT_TRUE(named({.top_logprobs = 21}, "top_logprobs"));
  EXPECT_TRUE(named({.logit_bias = {{1, 101.0f}}}, "logit_bias"));
  EXPECT_TRUE(named({.logit_bias = {{1000, 1.0f}}}, "logit_bias"));
}

}  // namespace
}  // namespace strata::sampling
