#include "kernels/kv_quant.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/quants.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

std::vector<float> gaussian(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// x through q4_0 and back: the plain quantizer, or the fitted one.
std::vector<float> q4_round_trip(const std::vector<float>& x, bool fitted) {
  std::vector<block_q4_0> blocks(x.size() / 32);
  if (fitted) quantize_q4_0_fitted(x.data(), blocks.data(), static_cast<std::int64_t>(x.size()));
  else quantize_row(dtype::q4_0, x.data(), blocks.data(), static_cast<std::int64_t>(x.size()));
  std::vector<float> y(x.size());
  dequantize_row(dtype::q4_0, blocks.data(), y.data(), static_cast<std::int64_t>(x.size()));
  return y;
}

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::pow(static_cast<double>(a[i]) - b[i], 2);
  return s;
}

TEST(kv_quant, the_rotation_width_is_the_largest_power_of_two_dividing_the_head) {
  EXPECT_EQ(rotation_width(64), 64);
  EXPECT_EQ(rotation_width(128), 128);
  EXPECT_EQ(rotation_width(256), 256);
  EXPECT_EQ(rotation_width(96), 32);
  EXPECT_EQ(rotation_width(80), 16);
  EXPECT_EQ(rotation_width(1024), 512);
}

TEST(kv_quant, the_rotation_is_orthonormal_and_its_inverse_returns_the_input) {
  std::mt19937 rng(test_seed());
  for (int width : {32, 64, 256, 512}) {
    SCOPED_TRACE(width);
    const std::size_t n = 2 * static_cast<std::size_t>(width);
    const auto a = gaussian(rng, n), b = gaussian(rng, n);
    auto ra = a, rb = b;
    rotate_pieces(ra.data(), static_cast<std::int64_t>(n), width);
    rotate_pieces(rb.data(), static_cast<std::int64_t>(n), width);
    EXPECT_NEAR(dot(ra, rb), dot(a, b), 1e-4 * (1 + std::fabs(dot(a, b))));
    EXPECT_NEAR(dot(ra, ra), dot(a, a), 1e-4 * dot(a, a));
    EXPECT_GT(squared_error(ra, a), 0.1 * dot(a, a)) << "the rotation left the values in place";
    unrotate_pieces(ra.data(), static_cast<std::int64_t>(n), width);
    for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(ra[i], a[i], 1e-5f * (1 + std::fabs(a[i])));
  }
}

TEST(kv_quant, one_spike_spreads_evenly_over_the_whole_head) {
  std::vector<float> spike(256, 0.0f);
  spike[77] = 16.0f;
  rotate_pieces(spike.data(), 256, 256);
  for (float x : spike) EXPECT_NEAR(std::fabs(x), 1.0f, 1e-5f);
}

TEST(kv_quant, the_fitted_scale_lowers_q4_0_error_and_never_raises_a_blocks) {
  std::mt19937 rng(test_seed());
  const auto x = gaussian(rng, 32 * 4096);
  const auto plain = q4_round_trip(x, false), fitted = q4_round_trip(x, true);
  for (std::size_t b = 0; b < x.size(); b += 32) {
    double ep = 0, ef = 0, norm = 0;
    for (std::size_t j = b; j < b + 32; ++j) {
      ep += std::pow(static_cast<double>(x[j]) - plain[j], 2);
      ef += std::pow(static_cast<double>(x[j]) - fitted[j], 2);
      norm += static_cast<double>(x[j]) * x[j];
    }
    // Up to the f16 rounding of the scale (a relative 2^-11 of every value).
    ASSERT_LE(ef, ep + 1e-5 * norm) << "block " << b / 32;
  }
  const double rms_plain = std::sqrt(squared_error(x, plain) / dot(x, x));
  const double rms_fitted = std::sqrt(squared_error(x, fitted) / dot(x, x));
  std::printf("q4_0 relative RMS error on N(0, 1) blocks: largest magnitude %.4f, fitted %.4f\n", rms_plain, rms_fitted);
  EXPECT_LE(rms_fitted, 0.96 * rms_plain);
  // All zero stays all zero.
  const std::vector<float> zeros(64, 0.0f);
  EXPECT_EQ(q4_round_trip(zeros, true), zeros);
}

TEST(kv_quant, the_block_rotation_at_least_halves_q4_0_error_of_keys_with_outlier_channels) {
  // Keys of trained models have a few channels far larger than the rest; a block's 4-bit scale
  // then fits the outlier and crushes its neighbours. Rotating spreads the outlier over the block.
  std::mt19937 rng(test_seed());
  constexpr int dim = 128, n = 400;
  const int outliers[] = {3, 40, 77, 101};
  double err_plain = 0, err_rotated = 0;
  for (int t = 0; t < n; ++t) {
    auto k = gaussian(rng, dim);
    for (int c : outliers) k[static_cast<std::size_t>(c)] *= 20.0f;
    auto q = gaussian(rng, dim);
    const double exact = dot(q, k);
    err_plain += std::pow(dot(q, q4_round_trip(k, false)) - exact, 2);
    rotate_pieces(k.data(), dim, 32);
    rotate_pieces(q.data(), dim, 32);
    err_rotated += std::pow(dot(q, q4_round_trip(k, false)) - exact, 2);
  }
  std::printf("q4_0 q.k mean squared error with 4 outlier channels of 128: plain %.3g, rotated %.3g (%.1fx less)\n",
              err_plain / n, err_rotated / n, err_plain / err_rotated);
  EXPECT_LE(err_rotated, 0.5 * err_plain);
}

/// One query's attention output over keys and values, exactly (softmax in double).
std::vector<double> attend(const std::vector<float>& q, const std::vector<std::vector<float>>& k,
                           const std::vector<std::vector<float>>& v) {
  std::vector<double> s(k.size()), out(q.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size()));
  for (std::size_t t = 0; t < k.size(); ++t) s[t] = dot(q, k[t]) * scale;
  const double mx = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (std::size_t t = 0; t < k.size(); ++t)
    for (std::size_t d = 0; d < q.size(); ++d) out[d] += s[t] / sum * v[t][d];
  return out;
}

TEST(kv_quant, q4_0_attention_with_outliers_errs_less_with_rotated_values_and_fitted_scales) {
  // Heads of 128 whose keys have outlier channels and whose values have one. The old scheme
  // rotated keys and queries per 32-value block and took each block's largest magnitude as its
  // scale; the new one also rotates the values over the whole head and fits every block's scale.
  std::mt19937 rng(test_seed());
  constexpr int dim = 128, positions = 256, queries = 64;
  const int key_outliers[] = {3, 40, 77, 101}, value_outlier = 64;
  std::vector<std::vector<float>> k(positions), v(positions);
  for (std::size_t t = 0; t < positions; ++t) {
    k[t] = gaussian(rng, dim);
    v[t] = gaussian(rng, dim);
    for (int c : key_outliers) k[t][static_cast<std::size_t>(c)] += 12.0f;
    v[t][value_outlier] *= 10.0f;
  }
  const auto query_seed = static_cast<unsigned>(rng());
  auto scheme_error = [&](bool new_scheme) {
    std::vector<std::vector<float>> kq(positions), vq(positions);
    for (std::size_t t = 0; t < positions; ++t) {
      auto kr = k[t], vr = v[t];
      rotate_pieces(kr.data(), dim, 32);
      if (new_scheme) rotate_pieces(vr.data(), dim, dim);
      kq[t] = q4_round_trip(kr, new_scheme);
      vq[t] = q4_round_trip(vr, new_scheme);
      if (new_scheme) unrotate_pieces(vq[t].data(), dim, dim);
    }
    std::mt19937 qrng(query_seed);
    double err = 0, norm = 0;
    for (int i = 0; i < queries; ++i) {
      auto q = gaussian(qrng, dim);
      const auto exact = attend(q, k, v);
      rotate_pieces(q.data(), dim, 32);
      const auto got = attend(q, kq, vq);
      for (std::size_t d = 0; d < dim; ++d) {
        err += std::pow(got[d] - exact[d], 2);
        norm += exact[d] * exact[d];
      }
    }
    return std::sqrt(err / norm);
  };
  const double old_error = scheme_error(false), new_error = scheme_error(true);
  std::printf("q4_0 attention relative error: keys rotated per block %.4f; and values over the head, scales fitted %.4f\n",
              old_error, new_error);
  EXPECT_LT(new_error, 0.92 * old_error);
}

}  // namespace
}  // namespace strata::kernels
