#include "kernels/matmul.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/packed_x16.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

// Errors are measured against sum_j |w_j * x_j| of the row and activation (the scale at which
// rounding happens), so one bound serves every magnitude.
/// A SIMD level against the scalar kernels: same integer sums, f32 accumulation in another order.
constexpr double k_simd_vs_scalar_tolerance = 2e-5;
/// Row dots with 8-bit activations against the exact product of the dequantized weights.
constexpr double k_q8_dot_tolerance = 6e-3;
/// f32/f16/bf16 row dots with f32 activations against the exact product.
constexpr double k_float_dot_tolerance = 1e-5;

constexpr dtype k_all_types[] = {dtype::f32,  dtype::f16,  dtype::bf16, dtype::q4_0, dtype::q4_1,
                                 dtype::q5_0, dtype::q5_1, dtype::q8_0, dtype::iq4_nl, dtype::q4_k,
                                 dtype::q5_k, dtype::q6_k, dtype::mxfp4};

struct problem {
  std::vector<std::byte> w;
  std::vector<float> x;
  std::vector<double> abs_dot;  // m x rows: sum_j |w_rj x_ij| with the dequantized weights
  std::vector<float> exact;     // m x rows
};

problem make_problem(dtype t, std::int64_t rows, std::int64_t k, std::int64_t m, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  problem p;
  std::vector<float> wf(static_cast<std::size_t>(rows * k));
  for (auto& v : wf) v = dist(gen) * 0.05f;
  p.w.resize(row_bytes(t, k) * static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r)
    quantize_row(t, wf.data() + r * k, p.w.data() + static_cast<std::size_t>(r) * row_bytes(t, k), k);
  p.x.resize(static_cast<std::size_t>(m * k));
  for (auto& v : p.x) v = dist(gen);
  p.exact.resize(static_cast<std::size_t>(m * rows));
  matmul_reference(t, p.w.data(), rows, k, p.x.data(), m, p.exact.data());
  std::vector<float> row(static_cast<std::size_t>(k));
  p.abs_dot.resize(static_cast<std::size_t>(m * rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, p.w.data() + static_cast<std::size_t>(r) * row_bytes(t, k), row.data(), k);
    for (std::int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < k; ++j) s += std::fabs(static_cast<double>(row[j]) * p.x[i * k + j]);
      p.abs_dot[i * rows + r] = s;
    }
  }
  return p;
}

double exact_tolerance(dtype t) {
  return act_format_for(t) == act_format::f32 ? k_float_dot_tolerance : k_q8_dot_tolerance;
}

class matmul_types : public ::testing::TestWithParam<dtype> {};

TEST_P(matmul_types, scalar_kernels_match_the_exact_product) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const dtype t = GetParam();
  compute_pool pool(2);
  for (std::int64_t m : {1, 3, 17}) {
    const std::int64_t rows = 37, k = 512;
    problem p = make_problem(t, rows, k, m, gen);
    std::vector<float> y(static_cast<std::size_t>(m * rows));
    matmul(pool, kernels_for(simd_level::scalar), t, p.w.data(), rows, k, p.x.data(), m, y.data());
    const double tol = exact_tolerance(t);
    for (std::size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], p.exact[i], tol * p.abs_dot[i] + 1e-6)
          << dtype_name(t) << " m " << m << " at " << i << " seed " << seed;
  }
}

TEST_P(matmul_types, every_simd_level_matches_the_scalar_kernels) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const dtype t = GetParam();
  compute_pool pool(2);
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    for (std::int64_t m : {1, 2, 5, 16, 23}) {
      const std::int64_t rows = 45, k = 768;
      problem p = make_problem(t, rows, k, m, gen);
      std::vector<float> want(static_cast<std::size_t>(m * rows)), got(want.size());
      matmul(pool, kernels_for(simd_level::scalar), t, p.w.data(), rows, k, p.x.data(), m, want.data());
      matmul(pool, kernels_for(level), t, p.w.data(), rows, k, p.x.data(), m, got.data());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], k_simd_vs_scalar_tolerance * p.abs_dot[i] + 1e-6)
            << simd_level_name(level) << " " << dtype_name(t) << " m " << m << " at " << i << " seed " << seed;
    }
  }
}

TEST_P(matmul_types, a_single_thread_and_the_pool_agree_exactly) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const dtype t = GetParam();
  compute_pool one(1), two(2);
  for (std::int64_t m : {1, 20}) {
    const std::int64_t rows = 133, k = 256;
    problem p = make_problem(t, rows, k, m, gen);
    std::vector<float> a(static_cast<std::size_t>(m * rows)), b(a.size());
    matmul(one, t, p.w.data(), rows, k, p.x.data(), m, a.data());
    matmul(two, t, p.w.data(), rows, k, p.x.data(), m, b.data());
    EXPECT_EQ(a, b) << dtype_name(t) << " m " << m << " seed " << seed;
  }
}

TEST_P(matmul_types, a_row_gets_the_same_result_alone_or_in_a_batch) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const dtype t = GetParam();
  compute_pool pool(2);
  const std::int64_t rows = 70, k = 512, m = 21;
  problem p = make_problem(t, rows, k, m, gen);
  std::vector<float> batch(static_cast<std::size_t>(m * rows)), alone(static_cast<std::size_t>(rows));
  matmul(pool, t, p.w.data(), rows, k, p.x.data(), m, batch.data());
  for (std::int64_t i : {0, 7, 20}) {
    matmul(pool, t, p.w.data(), rows, k, p.x.data() + i * k, 1, alone.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      // Every m runs the same operations per output (the float FMA tiles those of the row dots).
      ASSERT_EQ(alone[r], batch[i * rows + r]) << dtype_name(t) << " row " << i << " seed " << seed;
    }
  }
}

/// The packable types in groups of 16 rows (with rows % 16 left over in the GGUF layout) give back
/// every row's bytes exactly, the scalar kernels' products, the same result for a row alone or in
/// a batch of each tile width (1..8 rows, and runs past 64), and the same on one thread or two.
TEST(matmul, packed_weights_match_the_scalar_kernels_and_are_batch_invariant) {
  if (!simd_level_enabled(simd_level::avx512)) GTEST_SKIP() << "no packed kernels on this CPU";
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const kernel_table& kt = kernels_for(simd_level::avx512);
  compute_pool one(1), two(2);
  for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::iq4_nl, dtype::mxfp4, dtype::q4_k, dtype::q6_k}) {
    ASSERT_TRUE(x16_packable(t) && kt.packed_gemm[dtype_slot(t)]) << dtype_name(t);
    for (std::int64_t rows : {16, 45, 133}) {
      const std::int64_t k = 768, m = rows == 45 ? 75 : 21;
      problem p = make_problem(t, rows, k, m, gen);
      std::vector<std::byte> packed(p.w.size());
      pack_x16(t, p.w.data(), rows, k, packed.data());
      const std::size_t stride = row_bytes(t, k);
      std::vector<std::byte> row(stride);
      std::vector<float> values(static_cast<std::size_t>(k)), want_values(values.size());
      for (std::int64_t r = 0; r < rows; ++r) {
        unpack_x16_row(t, packed.data(), rows, r, k, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), p.w.data() + static_cast<std::size_t>(r) * stride, stride))
            << dtype_name(t) << " row " << r << " of " << rows;
        dequantize_x16_row(t, packed.data(), rows, r, k, values.data());
        dequantize_row(t, p.w.data() + static_cast<std::size_t>(r) * stride, want_values.data(), k);
        ASSERT_EQ(values, want_values) << dtype_name(t) << " row " << r << " of " << rows;
      }
      std::vector<float> want(static_cast<std::size_t>(m * rows)), got(want.size()), single(want.size());
      matmul(two, kernels_for(simd_level::scalar), t, p.w.data(), rows, k, p.x.data(), m, want.data());
      matmul(two, kt, t, p.w.data(), rows, k, p.x.data(), m, got.data(), packed.data());
      matmul(one, kt, t, p.w.data(), rows, k, p.x.data(), m, single.data(), packed.data());
      EXPECT_EQ(got, single) << dtype_name(t) << " rows " << rows << " seed " << seed;
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], k_simd_vs_scalar_tolerance * p.abs_dot[i] + 1e-6)
            << dtype_name(t) << " rows " << rows << " at " << i << " seed " << seed;
      std::vector<float> part(static_cast<std::size_t>(8 * rows));
      for (std::int64_t i : {std::int64_t{0}, std::int64_t{9}, m - 8}) {
        for (std::int64_t n = 1; n <= 8 && i + n <= m; ++n) {
          matmul(two, kt, t, p.w.data(), rows, k, p.x.data() + i * k, n, part.data(), packed.data());
          for (std::int64_t j = 0; j < n * rows; ++j)
            ASSERT_EQ(part[j], got[i * rows + j]) << dtype_name(t) << " rows " << rows << " from row " << i << " in " << n
                                                  << " at " << j << " seed " << seed;
        }
      }
    }
  }
}

TEST(matmul, several_weights_on_one_input_give_each_exactly_what_matmul_gives_it) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const kernel_table& kt = active_kernels();
  compute_pool two(2);
  const std::int64_t k = 512;
  // Shared activations (K-quants together, q8_0 with and without packing, the 32-value types
  // together, every other one of them packed), and a mix that cannot share (f16 beside q4_0) and
  // so runs one by one.
  const std::vector<std::vector<std::pair<dtype, std::int64_t>>> sets = {
      {{dtype::q4_k, 48}, {dtype::q6_k, 16}, {dtype::q5_k, 37}},
      {{dtype::q8_0, 64}, {dtype::q8_0, 45}},
      {{dtype::q4_1, 40}, {dtype::q4_0, 21}, {dtype::q4_1, 35}},
      {{dtype::q5_0, 32}, {dtype::iq4_nl, 19}, {dtype::q5_1, 27}, {dtype::mxfp4, 23}, {dtype::q5_0, 16}},
      {{dtype::f16, 40}, {dtype::q4_0, 33}},
  };
  for (std::int64_t m : {1, 3, 24}) {
    for (const auto& set : sets) {
      std::vector<problem> ps;
      std::vector<std::vector<std::byte>> packed;
      for (const auto& [t, rows] : set) {
        ps.push_back(make_problem(t, rows, k, 1, gen));
        packed.emplace_back();
        if (kt.packed_gemm[dtype_slot(t)] && packed.size() % 2 == 1) {
          packed.back().resize(ps.back().w.size());
          pack_x16(t, ps.back().w.data(), rows, k, packed.back().data());
        }
      }
      std::vector<float> x(static_cast<std::size_t>(m * k));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (auto& v : x) v = dist(gen);
      std::vector<std::vector<float>> want(set.size()), got(set.size());
      std::vector<matmul_out> outs;
      for (std::size_t i = 0; i < set.size(); ++i) {
        const auto [t, rows] = set[i];
        const void* pk = packed[i].empty() ? nullptr : packed[i].data();
        want[i].resize(static_cast<std::size_t>(m * rows));
        got[i].assign(want[i].size(), -1.0f);
        matmul(two, kt, t, ps[i].w.data(), rows, k, x.data(), m, want[i].data(), pk);
        outs.push_back(matmul_out{t, ps[i].w.data(), rows, got[i].data(), pk});
      }
      matmul_many(two, kt, outs, k, x.data(), m);
      for (std::size_t i = 0; i < set.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << dtype_name(set[i].first) << " m " << m << " seed " << seed;
    }
  }
}

/// The types of 32-value blocks, whose kernels take two blocks per step, with an odd number of
/// blocks per row (the last step has one) and rows that fill no tile: every level against the
/// scalar kernels, for GEMV and GEMM sizes.
TEST(matmul, an_odd_number_of_32_value_blocks_matches_the_scalar_kernels) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  compute_pool pool(2);
  for (dtype t : {dtype::q4_0, dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q8_0, dtype::iq4_nl, dtype::mxfp4}) {
    for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
      if (!simd_level_enabled(level)) continue;
      for (std::int64_t m : {1, 3, 7}) {
        const std::int64_t rows = 19, k = 32 * 23;
        problem p = make_problem(t, rows, k, m, gen);
        std::vector<float> want(static_cast<std::size_t>(m * rows)), got(want.size());
        matmul(pool, kernels_for(simd_level::scalar), t, p.w.data(), rows, k, p.x.data(), m, want.data());
        matmul(pool, kernels_for(level), t, p.w.data(), rows, k, p.x.data(), m, got.data());
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(want[i], p.exact[i], k_q8_dot_tolerance * p.abs_dot[i] + 1e-6)
              << dtype_name(t) << " m " << m << " at " << i << " seed " << seed;
          ASSERT_NEAR(got[i], want[i], k_simd_vs_scalar_tolerance * p.abs_dot[i] + 1e-6)
              << simd_level_name(level) << " " << dtype_name(t) << " m " << m << " at " << i << " seed " << seed;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(all, matmul_types, ::testing::ValuesIn(k_all_types),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(matmul, quantized_activations_keep_their_block_sums) {
  std::mt19937 gen(test_seed());
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(512);
  for (auto& v : x) v = dist(gen);
  alignas(64) std::byte buf[2048];
  ASSERT_LE(act_row_bytes(act_format::q8_256, 512), sizeof(buf));
  act_row a = quantize_activations(act_format::q8_256, x.data(), 512, buf);
  for (int s = 0; s < 32; ++s) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += a.qs[16 * s + j];
    EXPECT_EQ(a.sums[s], sum);
  }
  for (int j = 0; j < 512; ++j) EXPECT_NEAR(a.qs[j] * a.d[j / 256], x[j], a.d[j / 256] * 0.5f + 1e-6f);
}

/// matmul_grouped against each row run alone through the exact product of its expert's matrix:
/// experts of 40 rows stacked six deep, rows gathered by expert with some experts unused, one
/// that many rows chose (past k_gemm_min_m), and two weights sharing the job (the same matrices
/// here, so both outputs must be equal).
TEST_P(matmul_types, grouped_experts_match_each_row_through_its_own_expert) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const dtype t = GetParam();
  compute_pool pool(2);
  const std::int64_t experts = 6, rows = 40, k = 256, m = 27;
  const std::vector<expert_rows> groups{{4, 0, 1}, {0, 1, 3}, {2, 4, 20}, {5, 24, 3}};  // experts 1 and 3 unused
  problem a = make_problem(t, experts * rows, k, m, gen);
  std::vector<float> ya(static_cast<std::size_t>(m * rows)), yb(ya.size());
  const grouped_out outs[] = {{t, a.w.data(), rows, ya.data()}, {t, a.w.data(), rows, yb.data()}};
  matmul_grouped(pool, active_kernels(), outs, groups, k, a.x.data());
  const double tol = exact_tolerance(t);
  for (const expert_rows& g : groups)
    for (std::int64_t i = g.first; i < g.first + g.count; ++i)
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::size_t exact = static_cast<std::size_t>(i * experts * rows + g.expert * rows + r);
        const std::size_t got = static_cast<std::size_t>(i * rows + r);
        ASSERT_NEAR(ya[got], a.exact[exact], tol * a.abs_dot[exact] + 1e-6) << dtype_name(t) << " row " << i << " seed " << seed;
        ASSERT_EQ(yb[got], ya[got]) << dtype_name(t) << " row " << i << " seed " << seed;
      }
}

/// Gathered rows given through `source`, as the mixture-of-experts block passes them (each token's
/// row once, quantized once, however many experts chose it), get the very bits the same rows get
/// gathered into a copy per expert, for the quantized types; float weights refuse source rows.
TEST(matmul, grouped_rows_read_through_source_match_gathered_copies) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  compute_pool pool(2);
  const std::int64_t experts = 4, rows = 40, k = 256, tokens = 9, m = 18;
  // Each token twice, in the order the experts chose them; expert 2's 9 rows take the GEMM tiles.
  const std::vector<expert_rows> groups{{0, 0, 6}, {1, 6, 1}, {2, 7, 9}, {3, 16, 2}};
  std::vector<std::int32_t> source(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) source[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 5 % tokens);
  for (dtype t : {dtype::q4_0, dtype::q8_0, dtype::iq4_nl, dtype::mxfp4, dtype::q4_k, dtype::q6_k}) {
    const problem p = make_problem(t, experts * rows, k, tokens, gen);  // x: the tokens' rows
    std::vector<float> gathered(static_cast<std::size_t>(m * k));
    for (std::int64_t i = 0; i < m; ++i)
      std::copy_n(p.x.begin() + source[static_cast<std::size_t>(i)] * k, k, gathered.begin() + i * k);
    std::vector<float> want(static_cast<std::size_t>(m * rows)), got(want.size());
    const grouped_out a[] = {{t, p.w.data(), rows, want.data()}}, b[] = {{t, p.w.data(), rows, got.data()}};
    matmul_grouped(pool, active_kernels(), a, groups, k, gathered.data());
    matmul_grouped(pool, active_kernels(), b, groups, k, p.x.data(), source.data());
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " at " << i << " seed " << seed;
  }
  const problem f = make_problem(dtype::f32, experts * rows, k, tokens, gen);
  std::vector<float> y(static_cast<std::size_t>(m * rows));
  const grouped_out o[] = {{dtype::f32, f.w.data(), rows, y.data()}};
  EXPECT_THROW(matmul_grouped(pool, active_kernels(), o, groups, k, f.x.data(), source.data()), std::invalid_argument);
}

/// matmul_experts (the experts' two products and the activation between them in one pool job)
/// gives the very bits of matmul_grouped, the activation, and matmul_grouped again, one after the
/// other: for decode's one row per expert and a batch's groups, rows read through `source` or
/// gathered, GGUF and packed weights, one to four threads (uneven shares of the tasks from three),
/// and mixed types (q4_K gate and up, q6_K down, as in Q4_K_M files).
TEST(matmul, experts_in_one_job_match_their_products_one_after_the_other) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const kernel_table& kt = active_kernels();
  compute_pool one(1), two(2), three(3), four(4);
  const std::int64_t experts = 6, d = 256, ff = 512, tokens = 9;
  struct layout {
    std::vector<expert_rows> groups;
    std::vector<std::int32_t> source;
  };
  // Decode: one token, 4 experts; a batch: each token twice, one expert with many rows.
  const layout layouts[] = {{{{3, 0, 1}, {0, 1, 1}, {5, 2, 1}, {1, 3, 1}}, {0, 0, 0, 0}},
                            {{{0, 0, 6}, {1, 6, 1}, {2, 7, 9}, {4, 16, 2}}, {}}};
  const std::pair<dtype, dtype> types[] = {{dtype::q4_k, dtype::q6_k}, {dtype::q4_0, dtype::q8_0}, {dtype::mxfp4, dtype::q4_k}};
  for (const auto& [tg, td] : types) {
    const problem gate = make_problem(tg, experts * ff, d, tokens, gen), up = make_problem(tg, experts * ff, d, 1, gen);
    const problem down = make_problem(td, experts * d, ff, 1, gen);
    auto pack = [&](dtype t, const problem& p, std::int64_t rows, std::int64_t k) {
      std::vector<std::byte> out(p.w.size());
      const std::size_t bytes = row_bytes(t, k) * static_cast<std::size_t>(rows);
      for (std::int64_t e = 0; e < experts; ++e) pack_x16(t, p.w.data() + e * bytes, rows, k, out.data() + e * bytes);
      return out;
    };
    const bool packable = x16_packable(tg) && x16_packable(td) && kt.packed_gemm[dtype_slot(tg)] && kt.packed_gemm[dtype_slot(td)];
    std::vector<std::byte> pg, pu, pd;
    if (packable) pg = pack(tg, gate, ff, d), pu = pack(tg, up, ff, d), pd = pack(td, down, d, ff);
    for (const layout& l : layouts) {
      std::int64_t m = 0;
      for (const expert_rows& g : l.groups) m = std::max(m, g.first + g.count);
      std::vector<std::int32_t> source = l.source;
      if (source.empty())
        for (std::int64_t i = 0; i < m; ++i) source.push_back(static_cast<std::int32_t>(i * 5 % tokens));
      for (bool packed : {false, true}) {
        if (packed && !packable) continue;
        for (compute_pool* pool : {&one, &two, &three, &four}) {
          std::vector<float> g_want(static_cast<std::size_t>(m * ff)), u_want(g_want.size()), y_want(static_cast<std::size_t>(m * d));
          std::vector<float> g_got(g_want.size()), u_got(g_want.size()), y_got(y_want.size());
          auto act = [&](std::vector<float>& g, const std::vector<float>& u, const expert_rows& r) {
            for (std::int64_t i = r.first * ff; i < (r.first + r.count) * ff; ++i)
              g[static_cast<std::size_t>(i)] = g[static_cast<std::size_t>(i)] / (1.0f + std::exp(-g[static_cast<std::size_t>(i)])) *
                                               u[static_cast<std::size_t>(i)];
          };
          const grouped_out first_want[] = {{tg, gate.w.data(), ff, g_want.data(), packed ? pg.data() : nullptr},
                                            {tg, up.w.data(), ff, u_want.data(), packed ? pu.data() : nullptr}};
          const grouped_out second_want[] = {{td, down.w.data(), d, y_want.data(), packed ? pd.data() : nullptr}};
          matmul_grouped(*pool, kt, first_want, l.groups, d, gate.x.data(), source.data());
          for (const expert_rows& r : l.groups) act(g_want, u_want, r);
          matmul_grouped(*pool, kt, second_want, l.groups, ff, g_want.data());

          const grouped_out first_got[] = {{tg, gate.w.data(), ff, g_got.data(), packed ? pg.data() : nullptr},
                                           {tg, up.w.data(), ff, u_got.data(), packed ? pu.data() : nullptr}};
          const grouped_out second_got{td, down.w.data(), d, y_got.data(), packed ? pd.data() : nullptr};
          std::atomic<int> calls{0};  // between runs on whichever thread finishes a group
          auto between = [&](const expert_rows& r) {
            ++calls;
            act(g_got, u_got, r);
          };
          matmul_experts(*pool, kt, first_got, second_got, l.groups, d, gate.x.data(), source.data(), g_got.data(), std::ref(between));
          const std::string what = std::string(dtype_name(tg)) + "/" + dtype_name(td) + (packed ? " packed" : "") + ", " +
                                   std::to_string(pool->size()) + " threads, " + std::to_string(m) + " rows, seed " + std::to_string(seed);
          EXPECT_EQ(calls.load(), static_cast<int>(l.groups.size())) << what;
          for (std::size_t i = 0; i < y_want.size(); ++i) ASSERT_EQ(y_got[i], y_want[i]) << what << " at " << i;
        }
      }
    }
  }
}

TEST(matmul, every_level_quantizes_activations_to_the_same_bytes) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  const std::int64_t k = 1024;
  std::vector<float> x(k);
  for (auto& v : x) v = dist(gen);
  x[5] = 0;
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero group
  for (act_format fmt : {act_format::q8_32, act_format::q8_256}) {
    std::vector<std::byte> want(act_row_bytes(fmt, k) + 64), got(want.size());
    auto align = [](std::vector<std::byte>& v) {
      auto a = reinterpret_cast<std::uintptr_t>(v.data());
      return v.data() + (64 - a % 64) % 64;
    };
    quantize_activations(kernels_for(simd_level::scalar), fmt, x.data(), k, align(want));
    for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
      if (!simd_level_enabled(level)) continue;
      std::fill(got.begin(), got.end(), std::byte{0});
      quantize_activations(kernels_for(level), fmt, x.data(), k, align(got));
      EXPECT_EQ(0, std::memcmp(align(want), align(got), act_row_bytes(fmt, k)))
          << simd_level_name(level) << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace strata::kernels
