#include "kernels/ops.hpp"
#include "kernels/quants.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/simd.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

/// SIMD activations against std::exp / std::tanh: relative, plus an absolute floor near zero.
constexpr float k_activation_rel_tolerance = 2e-6f;
constexpr float k_activation_abs_tolerance = 1e-7f;

std::vector<float> random_values(std::int64_t n, float sigma, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

TEST(ops, simd_silu_and_gelu_match_the_scalar_ones) {
  const unsigned seed = test_seed();
  auto x = random_values(1003, 6.0f, seed);
  x[0] = 100.0f;
  x[1] = -100.0f;
  x[2] = 0.0f;
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    for (bool gelu_form : {false, true}) {
      auto want = x, got = x;
      const kernel_table& s = kernels_for(simd_level::scalar);
      const kernel_table& t = kernels_for(level);
      (gelu_form ? s.gelu : s.silu)(want.data(), static_cast<std::int64_t>(want.size()));
      (gelu_form ? t.gelu : t.silu)(got.data(), static_cast<std::int64_t>(got.size()));
      for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_NEAR(got[i], want[i], std::fabs(want[i]) * k_activation_rel_tolerance + k_activation_abs_tolerance)
            << simd_level_name(level) << (gelu_form ? " gelu" : " silu") << " x = " << x[i] << " seed " << seed;
    }
  }
}

TEST(ops, simd_f16_conversion_matches_the_scalar_one) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  // Every magnitude from f16's subnormals to past its largest value, both signs, and halfway cases.
  std::vector<float> x(1001);
  for (auto& v : x) v = std::ldexp(std::uniform_real_distribution<float>(-1.0f, 1.0f)(gen), std::uniform_int_distribution<int>(-30, 18)(gen));
  x[0] = 65520.0f;                    // rounds to infinity
  x[1] = 65519.0f;                    // the largest finite value
  x[2] = std::ldexp(1.0f, -25);       // half the smallest subnormal: to even (zero)
  x[3] = 1.0f + std::ldexp(1.0f, -11);  // a tie between 1 and the next f16: to even (1)
  x[4] = -0.0f;
  x[5] = std::numeric_limits<float>::infinity();
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    std::vector<std::uint16_t> want(x.size()), got(x.size());
    kernels_for(simd_level::scalar).f32_to_f16(x.data(), want.data(), static_cast<std::int64_t>(x.size()));
    kernels_for(level).f32_to_f16(x.data(), got.data(), static_cast<std::int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << simd_level_name(level) << " x = " << x[i] << " seed " << seed;
  }
}

TEST(ops, every_read_loop_sums_the_words_as_the_scalar_one_does) {
  std::mt19937_64 gen(test_seed());
  std::vector<std::uint64_t> words(32 * 37);
  for (auto& w : words) w = gen();  // the sums wrap
  const auto n = static_cast<std::int64_t>(words.size());
  std::uint64_t plain = 0;
  for (auto w : words) plain += w;
  std::uint64_t edge = 0;  // the first and last 32 words
  for (int i = 0; i < 32; ++i) edge += words[static_cast<std::size_t>(i)] + words[words.size() - 32 + i];
  for (simd_level level : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    for (int loop = 0; loop < k_read_loops; ++loop) {
      EXPECT_EQ(kernels_for(level).sum_words[loop](words.data(), n), plain) << simd_level_name(level) << " loop " << loop;
      EXPECT_EQ(kernels_for(level).sum_words[loop](words.data() + 32, n - 64), plain - edge)
          << simd_level_name(level) << " loop " << loop << " at an unaligned start";
    }
  }
}

TEST(ops, silu_and_gelu_follow_their_formulas) {
  float v[3] = {1.0f, -2.0f, 0.5f};
  silu(v, 3);
  EXPECT_NEAR(v[0], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6f);
  EXPECT_NEAR(v[1], -2.0f / (1.0f + std::exp(2.0f)), 1e-6f);
  float g[1] = {0.5f};
  gelu(g, 1);
  EXPECT_NEAR(g[0], 0.5f * 0.5f * (1.0f + std::tanh(0.7978845608f * (0.5f + 0.044715f * 0.125f))), 1e-6f);
}

TEST(ops, rms_norm_scales_to_unit_rms) {
  auto x = random_values(896, 3.0f, test_seed());
  std::vector<float> w(896, 2.0f), y(896);
  rms_norm(x.data(), w.data(), y.data(), 896, 1e-6f);
  double ss = 0;
  for (float v : y) ss += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(ss / 896), 2.0, 1e-4);
  rms_norm(x.data(), nullptr, x.data(), 896, 1e-6f);  // in place, no weight
  EXPECT_NEAR(x[7] * 2.0f, y[7], 1e-5f);
}

TEST(ops, rms_norm_matches_a_one_sum_reference_at_every_length_around_its_lanes) {
  // The sum of squares runs in 16 lanes with a tail: every length from 1 to 50 and the model
  // widths, against one running sum in double.
  const unsigned seed = test_seed();
  std::printf("rms_norm seed %u\n", seed);
  auto lengths = std::vector<std::int64_t>{256, 576, 640, 1027};
  for (std::int64_t n = 1; n <= 50; ++n) lengths.push_back(n);
  for (std::int64_t n : lengths) {
    const auto x = random_values(n, 3.0f, seed + static_cast<unsigned>(n));
    const auto w = random_values(n, 1.0f, seed + 7u * static_cast<unsigned>(n));
    std::vector<float> y(static_cast<std::size_t>(n));
    rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const float s = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + 1e-6f);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], x[i] * s * w[i]) << "n " << n << " i " << i;
  }
}

TEST(ops, rms_norm_of_every_simd_level_gives_the_scalar_bits) {
  // Every length from 1 to 50 (whole vectors and tails) and the model widths, with and without a
  // weight, in place too.
  const unsigned seed = test_seed();
  std::printf("rms_norm levels seed %u\n", seed);
  auto lengths = std::vector<std::int64_t>{256, 576, 640, 1027, 2048};
  for (std::int64_t n = 1; n <= 50; ++n) lengths.push_back(n);
  const kernel_table& scalar_kt = kernels_for(simd_level::scalar);
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    const kernel_table& kt = kernels_for(level);
    for (std::int64_t n : lengths) {
      const auto x = random_values(n, 3.0f, seed + static_cast<unsigned>(n));
      const auto w = random_values(n, 1.0f, seed + 7u * static_cast<unsigned>(n));
      std::vector<float> want(static_cast<std::size_t>(n)), got(want.size());
      for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
        scalar_kt.rms_norm(x.data(), weight, want.data(), n, 1e-6f);
        kt.rms_norm(x.data(), weight, got.data(), n, 1e-6f);
        ASSERT_EQ(got, want) << simd_level_name(level) << " n " << n << (weight ? "" : " no weight") << " seed " << seed;
        got = x;
        kt.rms_norm(got.data(), weight, got.data(), n, 1e-6f);
        ASSERT_EQ(got, want) << simd_level_name(level) << " in place, n " << n << " seed " << seed;
      }
    }
  }
}

TEST(ops, rope_rotates_adjacent_pairs_or_halves) {
  // One head of 4 dims, position 1, base 10000: pair i turns by 10000^(-2i/4).
  std::vector<float> normal = {1, 0, 1, 0}, neox = {1, 1, 0, 0};
  float cs[4];
  rope_angles(1, 4, 10000.0f, 1.0f, nullptr, cs);
  rope_rotate(normal.data(), 1, 4, 4, cs, false);
  rope_rotate(neox.data(), 1, 4, 4, cs, true);
  const float t0 = 1.0f, t1 = 0.01f;
  EXPECT_NEAR(normal[0], std::cos(t0), 1e-6f);
  EXPECT_NEAR(normal[1], std::sin(t0), 1e-6f);
  EXPECT_NEAR(normal[2], std::cos(t1), 1e-6f);
  EXPECT_NEAR(normal[3], std::sin(t1), 1e-6f);
  EXPECT_NEAR(neox[0], std::cos(t0), 1e-6f);
  EXPECT_NEAR(neox[2], std::sin(t0), 1e-6f);
  EXPECT_NEAR(neox[1], std::cos(t1), 1e-6f);
  EXPECT_NEAR(neox[3], std::sin(t1), 1e-6f);
}

TEST(ops, rope_angles_take_the_per_frequency_divisors) {
  // Two pairs, position 3, base 100: theta_i = 3 * 100^(-2i / 4) / factors[i].
  const float factors[2] = {2.0f, 0.5f};
  float cs[4];
  rope_angles(3, 4, 100.0f, 1.0f, factors, cs);
  EXPECT_NEAR(cs[0], std::cos(1.5f), 1e-6f);
  EXPECT_NEAR(cs[1], std::sin(1.5f), 1e-6f);
  EXPECT_NEAR(cs[2], std::cos(0.6f), 1e-6f);
  EXPECT_NEAR(cs[3], std::sin(0.6f), 1e-6f);
  // Other bases after this one get their own powers.
  rope_angles(3, 4, 10000.0f, 0.5f, nullptr, cs);
  EXPECT_NEAR(cs[2], std::cos(1.5f * 0.01f), 1e-6f);
}

TEST(ops, softmax_sums_to_one_and_returns_the_logsumexp) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 1000.0f};
  const float lse = softmax(x.data(), 3);
  EXPECT_NEAR(lse, std::log(std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f)), 1e-5f);
  EXPECT_NEAR(x[0] + x[1] + x[2], 1.0f, 1e-6f);
  EXPECT_NEAR(x[2], std::exp(3.0f - lse), 1e-6f);
  EXPECT_EQ(x[3], 1000.0f);  // past n: untouched
}

TEST(ops, f16_rows_convert_both_ways) {
  auto x = random_values(37, 10.0f, test_seed());
  std::vector<std::uint16_t> h(37);
  std::vector<float> back(37);
  convert_row_to_f16(x.data(), h.data(), 37);
  convert_row_from_f16(h.data(), back.data(), 37);
  for (int i = 0; i < 37; ++i) {
    EXPECT_EQ(h[static_cast<std::size_t>(i)], fp32_to_fp16(x[static_cast<std::size_t>(i)]));
    EXPECT_NEAR(back[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i)], std::fabs(x[static_cast<std::size_t>(i)]) * 1e-3f);
  }
}

TEST(ops, elementwise_ops_combine_rows) {
  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, y[3];
  mul(y, a, b, 3);
  EXPECT_EQ(y[2], 18.0f);
  add(y, a, b, 3);
  EXPECT_EQ(y[1], 7.0f);
  scale(y, 3, 0.5f);
  EXPECT_EQ(y[0], 2.5f);
}

}  // namespace
}  // namespace strata::kernels
