#include "src/sampling/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "src/sampling/text_stream.hpp"

namespace strata::sampling {
namespace {

TEST(sampler, temperature_zero_is_argmax) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd;
  for (int round = 0; round < 20; ++round) {
    std::vector<float> logits(1000);
    for (float& x : logits) x = nd(rng);
    auto want = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    sampler s({.temperature = 0.0f}, {});
    EXPECT_EQ(s.draw(logits.data(), 1000).token, want);
  }
}

TEST(sampler, draws_follow_the_softmax_within_binomial_error) {
  const std::vector<float> base = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f};
  const float temp = 0.7f;
  std::vector<double> p(base.size());
  double z = 0;
  for (std::size_t i = 0; i < base.size(); ++i) z += p[i] = std::exp(base[i] / temp);
  for (double& x : p) x /= z;
  sampler s({.temperature = temp, .seed = std::random_device{}()}, {});
  const int draws = 20000;
  std::vector<int> counts(base.size());
  for (int i = 0; i < draws; ++i) {
    auto l = base;
    // Penalties are off, so history does not matter.
    ++counts[static_cast<std::size_t>(s.draw(l.data(), 5).token)];
  }
  for (std::size_t i = 0; i < base.size(); ++i) {
    double sd = std::sqrt(draws * p[i] * (1 - p[i]));
    EXPECT_NEAR(counts[i], draws * p[i], 5 * sd + 1) << "token " << i;
  }
}

TEST(sampler, top_k_and_top_p_never_draw_outside_their_set) {
  const std::vector<float> base = {3.0f, 2.9f, 0.0f, -0.1f, -5.0f};
  sampler k({.temperature = 1.5f, .top_k = 2, .seed = 7}, {});
  sampler p({.temperature = 1.5f, .top_p = 0.5f, .seed = 7}, {});
  for (int i = 0; i < 2000; ++i) {
    auto a = base, b = base;
    EXPECT_LT(k.draw(a.data(), 5).token, 2);
    EXPECT_LT(p.draw(b.data(), 5).token, 2);
  }
}

TEST(sampler, the_same_seed_gives_the_same_tokens) {
  auto run = [](std::uint64_t seed) {
    sampler s({.temperature = 1.0f, .seed = seed}, {});
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l(50, 0.0f);
      out.push_back(s.draw(l.data(), 50).token);
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(sampler, penalties_and_bias_change_logits_as_defined) {
  sampler s({.temperature = 0.0f, .presence_penalty = 0.5f, .frequency_penalty = 0.25f, .repetition_penalty = 2.0f,
             .logit_bias = {{3, -100.0f}}},
            {1});
  std::vector<float> l = {1.0f, 4.0f, -1.0f, 9.0f};
  auto c = s.draw(l.data(), 4);
  EXPECT_EQ(c.token, 1);                 // 3 is banned
  EXPECT_FLOAT_EQ(l[1], 2.0f);           // prompt token 1: positive logit divided by 2
  std::vector<float> l2 = {1.0f, 4.0f, -1.0f, 9.0f};
  s.draw(l2.data(), 4);
  EXPECT_FLOAT_EQ(l2[1], 4.0f / 2.0f - 0.5f - 0.25f);  // generated once: penalties apply
}

TEST(sampler, logprobs_are_the_log_softmax_of_the_raw_logits) {
  std::vector<float> l = {0.5f, 2.0f, -1.0f};
  double z = std::exp(0.5) + std::exp(2.0) + std::exp(-1.0);
  sampler s({.temperature = 0.0f, .logprobs = true, .top_logprobs = 2}, {});
  auto c = s.draw(l.data(), 3);
  EXPECT_EQ(c.token, 1);
  EXPECT_NEAR(c.logprob, 2.0 - std::log(z), 1e-5);
  ASSERT_EQ(c.top_logprobs.size(), 2u);
  EXPECT_EQ(c.top_logprobs[1].first, 0);
  EXPECT_NEAR(c.top_logprobs[1].second, 0.5 - std::log(z), 1e-5);
}

TEST(sampler, out_of_range_parameters_are_named) {
  sampling_params p;
  p.temperature = 3;
  auto r = p.validate();
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("temperature"), std::string::npos);
}

TEST(text_stream, stop_strings_across_pieces_are_never_emitted) {
  text_stream t({"STOP", "xyz"});
  std::string out;
  for (std::string piece : {"hello S", "TO", "P world"}) {
    auto o = t.feed(piece);
    out += o.text;
    if (o.stopped) break;
  }
  EXPECT_EQ(out, "hello ");
}

TEST(text_stream, a_partial_match_that_fails_is_released) {
  text_stream t({"STOP"});
  auto a = t.feed("ST");
  EXPECT_EQ(a.text, "");
  auto b = t.feed("ay");
  EXPECT_EQ(b.text, "STay");
  EXPECT_FALSE(b.stopped);
}

TEST(text_stream, random_text_is_released_exactly_up_to_the_first_stop) {
  std::mt19937 rng(std::random_device{}());
  const std::string alphabet[] = {"a", "b", "é", "日", "\xF0\x9F\x9A\x80"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    for (int i = 0; i < 40; ++i) text += alphabet[rng() % 5];
    std::string stop = text.substr(rng() % text.size(), 1 + rng() % 4);
    text_stream t({stop});
    std::string out;
    bool stopped = false;
    for (std::size_t i = 0; i < text.size() && !stopped;) {
      std::size_t n = 1 + rng() % 5;  // pieces cut anywhere, even inside a character
      auto o = t.feed(text.substr(i, n));
      out += o.text;
      stopped = o.stopped;
      i += n;
    }
    if (!stopped) out += t.finish();
    std::size_t at = text.find(stop);
    std::string want = text.substr(0, at);
    // A stop string cut inside a character can never match whole characters' output; only
    // compare where the stop string itself is valid UTF-8 at that position.
    EXPECT_EQ(out.substr(0, std::min(out.size(), want.size())), want.substr(0, std::min(out.size(), want.size())));
    EXPECT_TRUE(stopped);
  }
}

}  // namespace
}  // namespace strata::sampling
