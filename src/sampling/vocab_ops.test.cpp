#include "src/sampling/vocab_ops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tests/support/test_seed.hpp"

namespace strata::sampling {
namespace {

TEST(vocab_ops, agree_with_plain_loops_on_fresh_random_logits) {
  std::mt19937 rng(test_seed());
  std::normal_distribution<float> nd(0.0f, 5.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int round = 0; round < 300; ++round) {
    std::vector<float> l(rng() % 100);  // lengths on and off the lane width, empty too
    for (float& x : l) {
      const auto kind = rng() % 20;
      x = kind == 0 ? -inf : kind == 1 ? std::numeric_limits<float>::quiet_NaN() : kind == 2 ? 3.0f : nd(rng);
    }
    const auto n = static_cast<std::int32_t>(l.size());
    float want_max = -inf;
    std::int32_t want_arg = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      if (l[static_cast<std::size_t>(i)] > want_max) {
        want_max = l[static_cast<std::size_t>(i)];
        want_arg = i;
      }
    }
    ASSERT_EQ(max_logit(l.data(), n), want_max);
    ASSERT_EQ(argmax(l.data(), n), want_arg);  // the first of equal maxima

    const float shift = want_max > -inf ? want_max : 0.0f;
    double want_sum = 0;
    for (float x : l)
      if (x == x) want_sum += std::exp(static_cast<double>(x - shift) * 0.5);
    std::vector<float> out(l.size());
    // NaN logits would make the sum NaN; compare on the NaN-free ones.
    std::vector<float> clean;
    for (float x : l)
      if (x == x) clean.push_back(x);
    const double got = exp_and_sum(clean.data(), static_cast<std::int32_t>(clean.size()), shift, 0.5f, out.data());
    ASSERT_NEAR(got, want_sum, 1e-6 * want_sum + 1e-30);
    for (std::size_t i = 0; i < clean.size(); ++i)
      ASSERT_NEAR(out[i], std::exp(static_cast<double>(clean[i] - shift) * 0.5), 1e-6 * out[i] + 1e-30);
    double want_plain = 0;
    for (float x : clean) want_plain += std::exp(static_cast<double>(x - shift));
    ASSERT_NEAR(sum_exp(clean.data(), static_cast<std::int32_t>(clean.size()), shift), want_plain, 1e-6 * want_plain + 1e-30);
  }
}

}  // namespace
}  // namespace strata::sampling
