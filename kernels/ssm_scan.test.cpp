#include "kernels/ssm_scan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

/// Chunked against row-by-row sums: the same terms in another order, in f32 (relative to values
/// of order 1..10).
constexpr float k_chunked_tolerance = 5e-4f;

/// Random scan inputs for one head: x, B and C of order 1, steps in (0, 1.5) (after softplus), a
/// decay rate in [-2, -0.05] and a random starting state.
struct scan_inputs {
  int head_dim, d_state;
  std::int64_t n;
  float a;
  std::vector<float> x, bc, dt, state;  // bc: n rows of B | C

  scan_inputs(int hd, int ds, std::int64_t rows, std::uint32_t seed) : head_dim(hd), d_state(ds), n(rows) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    x.resize(static_cast<std::size_t>(n * hd));
    bc.resize(static_cast<std::size_t>(n * 2 * ds));
    for (auto* v : {&x, &bc})
      for (auto& e : *v) e = normal(gen);
    for (std::int64_t t = 0; t < n; ++t) dt.push_back(0.01f + 1.5f * unit(gen));
    a = -(0.05f + 1.95f * unit(gen));
    state.resize(static_cast<std::size_t>(hd * ds));
    for (auto& e : state) e = 0.3f * normal(gen);
  }
  ssm_scan_rows rows(float* y) const {
    return {x.data(), head_dim, bc.data(), bc.data() + d_state, 2 * d_state, dt.data(), 1, y, head_dim, n};
  }
};

/// The largest |a[i] - b[i]|.
float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return std::transform_reduce(a.begin(), a.end(), b.begin(), 0.0f, [](float x, float y) { return std::max(x, y); },
                               [](float x, float y) { return std::fabs(x - y); });
}

TEST(ssm_scan, the_recurrence_follows_its_definition_for_two_rows) {
  // One x value and one state value: S1 = e^{dt0 a} S0 + dt0 x0 B0, y0 = S1 C0, and on.
  const float x[] = {2.0f, -1.0f}, bc[] = {0.5f, 3.0f, 1.5f, -2.0f}, dt[] = {0.25f, 0.75f};
  const float a = -0.5f;
  float y[2], s = 0.4f;
  ssm_scan_recurrent({x, 1, bc, bc + 1, 2, dt, 1, y, 1, 2}, 1, 1, a, &s);
  const float s1 = std::exp(0.25f * a) * 0.4f + 0.25f * 2.0f * 0.5f;
  const float s2 = std::exp(0.75f * a) * s1 + 0.75f * -1.0f * 1.5f;
  EXPECT_NEAR(y[0], s1 * 3.0f, 1e-6f);
  EXPECT_NEAR(y[1], s2 * -2.0f, 1e-6f);
  EXPECT_NEAR(s, s2, 1e-6f);
}

TEST(ssm_scan, chunked_prefill_equals_the_row_by_row_recurrence) {
  const std::uint32_t seed = test_seed();
  const kernel_table& ref = kernels_for(simd_level::scalar);
  for (int head_dim : {8, 64}) {
    for (int chunk : {64, 7, 1}) {
      scan_inputs in(head_dim, 16, 150, seed + static_cast<std::uint32_t>(head_dim + chunk));
      std::vector<float> y_r(static_cast<std::size_t>(in.n * head_dim)), y_c(y_r.size());
      std::vector<float> state_r = in.state, state_c = in.state;
      ssm_scan_recurrent(in.rows(y_r.data()), head_dim, in.d_state, in.a, state_r.data());
      std::vector<float> work(ssm_scan_work_floats(head_dim));
      ssm_scan_chunked(ref, in.rows(y_c.data()), head_dim, in.d_state, in.a, state_c.data(), work.data(), chunk);
      EXPECT_LE(max_diff(y_r, y_c), k_chunked_tolerance) << "outputs, head_dim " << head_dim << " chunk " << chunk;
      EXPECT_LE(max_diff(state_r, state_c), k_chunked_tolerance) << "state, head_dim " << head_dim << " chunk " << chunk;
    }
  }
}

TEST(ssm_scan, prefill_then_decode_continues_the_same_state) {
  const std::uint32_t seed = test_seed();
  const kernel_table& kt = active_kernels();
  const int head_dim = 16, d_state = 32;
  scan_inputs in(head_dim, d_state, 100, seed);
  std::vector<float> all(static_cast<std::size_t>(in.n * head_dim)), split(all.size());
  std::vector<float> state_all = in.state, state_split = in.state;
  ssm_scan_recurrent(in.rows(all.data()), head_dim, d_state, in.a, state_all.data());
  // 90 rows chunked, then 10 one at a time.
  ssm_scan_rows first = in.rows(split.data());
  first.n = 90;
  std::vector<float> work(ssm_scan_work_floats(head_dim));
  ssm_scan_chunked(kt, first, head_dim, d_state, in.a, state_split.data(), work.data());
  for (std::int64_t t = 90; t < in.n; ++t) {
    ssm_scan_rows one = in.rows(split.data());
    one.x += t * one.x_stride;
    one.B += t * one.bc_stride;
    one.C += t * one.bc_stride;
    one.dt += t;
    one.y += t * one.y_stride;
    one.n = 1;
    ssm_scan_recurrent(one, head_dim, d_state, in.a, state_split.data());
  }
  EXPECT_LE(max_diff(all, split), k_chunked_tolerance);
  EXPECT_LE(max_diff(state_all, state_split), k_chunked_tolerance);
}

TEST(ssm_scan, simd_levels_match_the_scalar_kernels) {
  const std::uint32_t seed = test_seed();
  const int head_dim = 64, d_state = 128;
  scan_inputs in(head_dim, d_state, 80, seed);
  std::vector<float> want(static_cast<std::size_t>(in.n * head_dim)), got(want.size());
  std::vector<float> s_want = in.state;
  std::vector<float> work(ssm_scan_work_floats(head_dim));
  ssm_scan_chunked(kernels_for(simd_level::scalar), in.rows(want.data()), head_dim, d_state, in.a, s_want.data(), work.data());
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    std::vector<float> s_got = in.state;
    ssm_scan_chunked(kernels_for(level), in.rows(got.data()), head_dim, d_state, in.a, s_got.data(), work.data());
    EXPECT_LE(max_diff(want, got), 1e-3f) << simd_level_name(level);
    EXPECT_LE(max_diff(s_want, s_got), 1e-3f) << simd_level_name(level);
  }
}

}  // namespace
}  // namespace strata::kernels
