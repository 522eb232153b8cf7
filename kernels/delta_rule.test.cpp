#include "kernels/delta_rule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

/// Chunked against row-by-row sums: the same terms in another order, in f32.
constexpr float k_chunked_tolerance = 2e-4f;

/// Random delta-rule inputs for one head: unit-length q and k (as the layer gives them), decays
/// in [-1, 0], strengths in (0, 1), and a random starting state.
struct head_inputs {
  int dim;
  std::int64_t n;
  std::vector<float> qkv, g, beta, state;  // qkv: n rows of q | k | v

  head_inputs(int d, std::int64_t rows, std::uint32_t seed) : dim(d), n(rows) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    qkv.resize(static_cast<std::size_t>(n * 3 * dim));
    for (auto& x : qkv) x = normal(gen);
    for (std::int64_t t = 0; t < n; ++t) {
      l2_norm_heads(qkv.data() + t * 3 * dim, 2, dim, 1e-6f);
      g.push_back(-unit(gen));
      beta.push_back(0.05f + 0.9f * unit(gen));
    }
    state.resize(static_cast<std::size_t>(dim * dim));
    for (auto& x : state) x = 0.3f * normal(gen);
  }
  delta_rule_rows rows(float* out) const {
    return {qkv.data(), qkv.data() + dim, qkv.data() + 2 * dim, 3 * dim, g.data(), beta.data(), 1, out, dim, n};
  }
};

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

TEST(delta_rule, chunked_prefill_equals_the_row_by_row_recurrence) {
  const std::uint32_t seed = test_seed();
  const kernel_table& ref = kernels_for(simd_level::scalar);
  for (int dim : {16, 64}) {
    for (int chunk : {64, 7, 1}) {
      head_inputs in(dim, 150, seed + static_cast<std::uint32_t>(dim + chunk));
      std::vector<float> out_r(static_cast<std::size_t>(in.n * dim)), out_c(out_r.size());
      std::vector<float> state_r = in.state, state_c = in.state;
      const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
      delta_rule_recurrent(ref, in.rows(out_r.data()), dim, scale, state_r.data());
      std::vector<float> work(delta_rule_work_floats(dim));
      delta_rule_chunked(ref, in.rows(out_c.data()), dim, scale, state_c.data(), work.data(), chunk);
      EXPECT_LE(max_diff(out_r, out_c), k_chunked_tolerance) << "outputs, dim " << dim << " chunk " << chunk;
      EXPECT_LE(max_diff(state_r, state_c), k_chunked_tolerance) << "state, dim " << dim << " chunk " << chunk;
    }
  }
}

TEST(delta_rule, prefill_then_decode_continues_the_same_state) {
  const std::uint32_t seed = test_seed();
  const kernel_table& kt = active_kernels();
  const int dim = 32;
  head_inputs in(dim, 100, seed);
  std::vector<float> all(static_cast<std::size_t>(in.n * dim)), split(all.size());
  std::vector<float> state_all = in.state, state_split = in.state;
  delta_rule_recurrent(kt, in.rows(all.data()), dim, 0.5f, state_all.data());
  // 90 rows chunked, then 10 one at a time.
  delta_rule_rows first = in.rows(split.data());
  first.n = 90;
  std::vector<float> work(delta_rule_work_floats(dim));
  delta_rule_chunked(kt, first, dim, 0.5f, state_split.data(), work.data());
  for (std::int64_t t = 90; t < in.n; ++t) {
    delta_rule_rows one = in.rows(split.data());
    one.q += t * one.qkv_stride;
    one.k += t * one.qkv_stride;
    one.v += t * one.qkv_stride;
    one.g += t;
    one.beta += t;
    one.out += t * dim;
    one.n = 1;
    delta_rule_recurrent(kt, one, dim, 0.5f, state_split.data());
  }
  EXPECT_LE(max_diff(all, split), k_chunked_tolerance);
  EXPECT_LE(max_diff(state_all, state_split), k_chunked_tolerance);
}

TEST(delta_rule, simd_levels_match_the_scalar_kernels) {
  const std::uint32_t seed = test_seed();
  const int dim = 128;
  head_inputs in(dim, 80, seed);
  std::vector<float> want(static_cast<std::size_t>(in.n * dim)), got(want.size());
  std::vector<float> s_want = in.state;
  std::vector<float> work(delta_rule_work_floats(dim));
  delta_rule_chunked(kernels_for(simd_level::scalar), in.rows(want.data()), dim, 0.1f, s_want.data(), work.data());
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    std::vector<float> s_got = in.state;
    delta_rule_chunked(kernels_for(level), in.rows(got.data()), dim, 0.1f, s_got.data(), work.data());
    EXPECT_LE(max_diff(want, got), 1e-4f) << simd_level_name(level);
    EXPECT_LE(max_diff(s_want, s_got), 1e-4f) << simd_level_name(level);
  }
}

TEST(causal_conv, rows_in_several_calls_equal_one_call_and_the_definition) {
  const std::uint32_t seed = test_seed();
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int taps = 4, channels = 10;
  const std::int64_t n = 9;
  std::vector<float> x(static_cast<std::size_t>(n * channels)), w(static_cast<std::size_t>(channels * taps));
  std::vector<float> start(static_cast<std::size_t>((taps - 1) * channels));
  for (auto* v : {&x, &w, &start})
    for (auto& e : *v) e = normal(gen);
  // The definition: the start rows, then x, and each output row the taps over its window.
  std::vector<float> want(x.size());
  for (std::int64_t t = 0; t < n; ++t)
    for (int c = 0; c < channels; ++c) {
      float s = 0;
      for (int k = 0; k < taps; ++k) {
        const std::int64_t row = t - (taps - 1) + k;
        s += (row < 0 ? start[static_cast<std::size_t>((row + taps - 1) * channels + c)] : x[static_cast<std::size_t>(row * channels + c)]) *
             w[static_cast<std::size_t>(c * taps + k)];
      }
      want[static_cast<std::size_t>(t * channels + c)] = s;
    }
  std::vector<float> taps_w(w.size());
  conv_taps_major(w.data(), channels, taps, taps_w.data());
  std::vector<float> one(x.size()), parts(x.size());
  std::vector<float> state_one = start, state_parts = start;
  causal_conv(x.data(), channels, n, channels, 0, channels, taps_w.data(), taps, state_one.data(), one.data(), channels);
  // Parts of 1, 2 and 6 rows (shorter and longer than the state), each in two channel ranges.
  std::int64_t t = 0;
  for (std::int64_t len : {1, 2, 6}) {
    for (auto [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 3}, {3, channels}})
      causal_conv(x.data() + t * channels, channels, len, channels, c0, c1, taps_w.data(), taps, state_parts.data(),
                  parts.data() + t * channels, channels);
    t += len;
  }
  EXPECT_LE(max_diff(want, one), 1e-5f);
  EXPECT_EQ(one, parts);
  EXPECT_EQ(state_one, state_parts);
  EXPECT_EQ(std::vector<float>(x.end() - (taps - 1) * channels, x.end()), state_one);
}

}  // namespace
}  // namespace strata::kernels
