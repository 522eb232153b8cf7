#include "kernels/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

/// The online-softmax scalar kernel against the two-pass double-precision definition.
constexpr double k_scalar_vs_exact = 2e-5;
/// A SIMD variant against the scalar kernel (only the summation order differs).
constexpr double k_simd_vs_scalar = 1e-5;

/// A layer's KV pool with random contents in one format (f16, q8_0 or q4_0) and one sequence
/// spread over shuffled pages. The reference reads the same stored values, dequantized.
struct paged_kv {
  paged_kv(std::mt19937& rng, int n_head_kv, int head_dim, int page_tokens, int n_positions, dtype format = dtype::f16)
      : kv_dim(n_head_kv * head_dim), page_tokens(page_tokens), format(format), head_dim(head_dim) {
    const int n_pages = (n_positions + page_tokens - 1) / page_tokens + 3;  // some pages unused
    row_bytes = static_cast<std::int64_t>(kv_dim) / block_elements(format) * static_cast<std::int64_t>(block_bytes(format));
    const std::size_t rows = static_cast<std::size_t>(n_pages) * page_tokens;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto fill = [&](std::vector<std::byte>& raw, std::vector<float>& deq) {
      raw.resize(rows * static_cast<std::size_t>(row_bytes));
      deq.resize(rows * static_cast<std::size_t>(kv_dim));
      std::vector<float> x(static_cast<std::size_t>(kv_dim));
      for (std::size_t r = 0; r < rows; ++r) {
        for (auto& e : x) e = u(rng);
        quantize_row(format, x.data(), raw.data() + r * static_cast<std::size_t>(row_bytes), kv_dim);
        dequantize_row(format, raw.data() + r * static_cast<std::size_t>(row_bytes), deq.data() + r * static_cast<std::size_t>(kv_dim), kv_dim);
      }
    };
    fill(k, k_deq);
    fill(v, v_deq);
    blocks.resize(static_cast<std::size_t>(n_pages));
    std::iota(blocks.begin(), blocks.end(), 100);  // ids need not start at 0: block_offset
    std::shuffle(blocks.begin(), blocks.end(), rng);
  }
  kv_page_view view() const {
    const std::int64_t head_bytes = row_bytes / (kv_dim / head_dim);
    return {k.data(), v.data(), page_tokens * row_bytes, row_bytes, head_bytes, page_tokens, blocks.data(), 100, format};
  }
  float key(int pos, int kvh, int head_dim, int d) const { return at(k_deq, pos, kvh, head_dim, d); }
  float value(int pos, int kvh, int head_dim, int d) const { return at(v_deq, pos, kvh, head_dim, d); }

  int kv_dim = 0, page_tokens = 0;
  dtype format;
  int head_dim;
  std::int64_t row_bytes = 0;
  std::vector<std::byte> k, v;
  std::vector<float> k_deq, v_deq;
  std::vector<std::int32_t> blocks;

 private:
  float at(const std::vector<float>& pool, int pos, int kvh, int head_dim, int d) const {
    const std::size_t page = static_cast<std::size_t>(blocks[static_cast<std::size_t>(pos / page_tokens)] - 100);
    return pool[(page * page_tokens + static_cast<std::size_t>(pos % page_tokens)) * kv_dim +
                static_cast<std::size_t>(kvh * head_dim + d)];
  }
};

/// Two passes in double: scores, softmax, weighted sum.
std::vector<double> exact_attention(const attention_shape& s, const paged_kv& kv, int first, int last,
                                    const std::vector<float>& q) {
  std::vector<double> out(static_cast<std::size_t>(s.n_head * s.head_dim));
  const int group = s.n_head / s.n_head_kv;
  for (int h = 0; h < s.n_head; ++h) {
    std::vector<double> sc;
    for (int t = first; t <= last; ++t) {
      double dot = 0;
      for (int d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[static_cast<std::size_t>(h * s.head_dim + d)]) * kv.key(t, h / group, s.head_dim, d);
      dot *= s.scale;
      if (s.softcap > 0) dot = s.softcap * std::tanh(dot / s.softcap);
      sc.push_back(dot);
    }
    const double mx = *std::max_element(sc.begin(), sc.end());
    double sum = 0;
    for (double& x : sc) sum += (x = std::exp(x - mx));
    for (int d = 0; d < s.head_dim; ++d) {
      double acc = 0;
      for (int t = first; t <= last; ++t) acc += sc[static_cast<std::size_t>(t - first)] * kv.value(t, h / group, s.head_dim, d);
      out[static_cast<std::size_t>(h * s.head_dim + d)] = acc / sum;
    }
  }
  return out;
}

struct attention_case {
  int n_head, n_head_kv, head_dim, page_tokens, first, last;
  float softcap;
};

const attention_case k_cases[] = {
    {4, 4, 64, 32, 0, 0, 0.0f},        // one position: the output is that position's value
    {4, 2, 64, 32, 0, 100, 0.0f},      // GQA over four pages
    {14, 2, 64, 16, 0, 300, 0.0f},     // a group of 7 query heads per kv head
    {8, 1, 128, 32, 37, 259, 0.0f},    // a window that starts inside a page
    {4, 2, 256, 32, 0, 77, 50.0f},     // soft-capped scores, long heads
    {2, 1, 20, 8, 3, 45, 0.0f},        // a head length that is no multiple of the SIMD width
    {6, 3, 80, 32, 0, 1000, 0.0f},     // a long context, scores far apart
};

std::vector<float> random_query(std::mt19937& rng, int n, float amplitude) {
  std::uniform_real_distribution<float> u(-amplitude, amplitude);
  std::vector<float> q(static_cast<std::size_t>(n));
  for (auto& x : q) x = u(rng);
  return q;
}

constexpr dtype k_formats[] = {dtype::f16, dtype::q8_0, dtype::q4_0};

/// One query row through a kernel.
void one_row(attention_fn fn, const attention_shape& s, const kv_page_view& kv, int first, int last, const float* q,
             float* out, int head_begin, int head_end) {
  const attention_row row{q, out, first, last};
  fn(s, kv, &row, 1, head_begin, head_end);
}

/// Quantized pages need whole blocks of 32 values per head.
bool fits(const attention_case& c, dtype f) { return f == dtype::f16 || c.head_dim % 32 == 0; }

/// Calls check(format, case, shape, cache, query) for every format and case that fits, with a
/// paged cache of random keys and values and large random queries (which make the softmax
/// peaked, where online rescaling matters); stops at the first fatal failure.
template <class Check>
void for_each_case(std::mt19937& rng, Check check) {
  for (dtype f : k_formats)
    for (const auto& c : k_cases) {
      if (!fits(c, f)) continue;
      attention_shape s{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.softcap};
      paged_kv kv(rng, c.n_head_kv, c.head_dim, c.page_tokens, c.last + 1, f);
      const auto q = random_query(rng, c.n_head * c.head_dim, 4.0f);
      check(f, c, s, kv, q);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(attention, scalar_kernel_matches_the_exact_two_pass_softmax) {
  std::mt19937 rng(test_seed());
  for_each_case(rng, [&](dtype f, const attention_case& c, const attention_shape& s, const paged_kv& kv, const std::vector<float>& q) {
    std::vector<float> out(q.size(), -1.0f);
    one_row(scalar::attention, s, kv.view(), c.first, c.last, q.data(), out.data(), 0, c.n_head);
    auto want = exact_attention(s, kv, c.first, c.last, q);
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], want[i], k_scalar_vs_exact) << dtype_name(f) << " head_dim " << c.head_dim << " last " << c.last << " at " << i;
  });
}

TEST(attention, one_position_returns_its_value_row) {
  std::mt19937 rng(test_seed());
  attention_shape s{4, 2, 32, 0.2f, 0.0f};
  paged_kv kv(rng, 2, 32, 32, 40);
  auto q = random_query(rng, 4 * 32, 1.0f);
  std::vector<float> out(q.size());
  one_row(scalar::attention, s, kv.view(), 33, 33, q.data(), out.data(), 0, 4);
  for (int h = 0; h < 4; ++h)
    for (int d = 0; d < 32; ++d) EXPECT_EQ(out[static_cast<std::size_t>(h * 32 + d)], kv.value(33, h / 2, 32, d));
}

TEST(attention, writes_only_the_heads_asked_for) {
  std::mt19937 rng(test_seed());
  attention_shape s{8, 2, 64, 0.125f, 0.0f};
  paged_kv kv(rng, 2, 64, 32, 50);
  auto q = random_query(rng, 8 * 64, 1.0f);
  std::vector<float> out(q.size(), 7.0f);
  one_row(attention, s, kv.view(), 0, 49, q.data(), out.data(), 3, 6);
  for (int h = 0; h < 8; ++h) {
    const bool asked = h >= 3 && h < 6;
    for (int d = 0; d < 64; ++d) {
      float x = out[static_cast<std::size_t>(h * 64 + d)];
      if (asked) EXPECT_LT(std::fabs(x), 1.0f);
      else EXPECT_EQ(x, 7.0f);
    }
  }
}

TEST(attention, simd_variants_match_the_scalar_kernel) {
  std::mt19937 rng(test_seed());
  int tested = 0;
  for (simd_level level : {simd_level::avx2, simd_level::avx512}) {
    if (!simd_level_enabled(level)) continue;
    ++tested;
    attention_fn fn = attention_for(level);
    for_each_case(rng, [&](dtype f, const attention_case& c, const attention_shape& s, const paged_kv& kv, const std::vector<float>& q) {
      std::vector<float> want(q.size()), got(q.size());
      one_row(scalar::attention, s, kv.view(), c.first, c.last, q.data(), want.data(), 0, c.n_head);
      one_row(fn, s, kv.view(), c.first, c.last, q.data(), got.data(), 0, c.n_head);
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], k_simd_vs_scalar) << simd_level_name(level) << " " << dtype_name(f) << " head_dim " << c.head_dim << " at " << i;
    });
    if (HasFatalFailure()) return;
  }
  if (tested == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

/// Rows of a prefill chunk (consecutive positions, causal, optionally a sliding window) in one call,
/// on every variant, against each row on its own through the exact two-pass definition. More rows
/// than one pass takes, heads split across a group, windows shorter than the chunk, and
/// a softcap, so that rows skip whole tiles and mask parts of others.
TEST(attention, rows_of_a_chunk_in_one_call_match_each_row_alone) {
  std::mt19937 rng(test_seed());
  struct chunk_case {
    int n_head, n_head_kv, head_dim, page_tokens, start, n_rows, window, head_begin, head_end;
    float softcap;
  };
  const chunk_case cases[] = {
      {14, 2, 64, 16, 300, 24, 0, 0, 14, 0.0f},    // the 0.4B model's shape, 24 rows after a cached prefix
      {14, 2, 64, 32, 0, 40, 0, 7, 11, 0.0f},      // a chunk from position 0; part of a group
      {8, 4, 64, 32, 90, 70, 37, 0, 8, 30.0f},     // a window shorter than the chunk, soft-capped
      {4, 1, 128, 16, 5, 9, 0, 1, 3, 0.0f},        // long heads, pages of 16
      {2, 2, 32, 8, 200, 33, 4, 0, 2, 0.0f},       // a tiny window: rows far apart share no tile
  };
  for (attention_fn fn : {attention_for(simd_level::scalar), attention_for(simd_level::avx2), attention_for(simd_level::avx512)}) {
    if (fn == attention_for(simd_level::avx2) && !simd_level_enabled(simd_level::avx2)) continue;
    if (fn == attention_for(simd_level::avx512) && !simd_level_enabled(simd_level::avx512)) continue;
    for (dtype f : k_formats)
    for (const auto& c : cases) {
      if (f != dtype::f16 && c.head_dim % 32 != 0) continue;
      attention_shape s{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.softcap};
      paged_kv kv(rng, c.n_head_kv, c.head_dim, c.page_tokens, c.start + c.n_rows, f);
      const std::size_t qd = static_cast<std::size_t>(c.n_head * c.head_dim);
      auto q = random_query(rng, static_cast<int>(qd) * c.n_rows, 4.0f);
      std::vector<float> out(q.size(), 7.0f);
      std::vector<attention_row> rows;
      for (int r = 0; r < c.n_rows; ++r) {
        const int pos = c.start + r;
        const int first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
        rows.push_back({q.data() + r * qd, out.data() + r * qd, first, pos});
      }
      fn(s, kv.view(), rows.data(), c.n_rows, c.head_begin, c.head_end);
      for (int r = 0; r < c.n_rows; ++r) {
        const std::vector<float> qr(q.begin() + static_cast<std::ptrdiff_t>(r * qd), q.begin() + static_cast<std::ptrdiff_t>((r + 1) * qd));
        const auto want = exact_attention(s, kv, rows[static_cast<std::size_t>(r)].first, rows[static_cast<std::size_t>(r)].last, qr);
        for (std::size_t i = 0; i < qd; ++i) {
          const int h = static_cast<int>(i) / c.head_dim;
          const float got = out[r * qd + i];
          if (h < c.head_begin || h >= c.head_end) ASSERT_EQ(got, 7.0f) << "row " << r << " head " << h << " was not asked for";
          else ASSERT_NEAR(got, want[i], k_scalar_vs_exact) << dtype_name(f) << " start " << c.start << " row " << r << " at " << i;
        }
      }
    }
  }
}

/// One row's positions cut into 2 to 5 random ranges, each attended alone with its log-sum-exps,
/// then merged: on every variant, against the exact two-pass definition over the whole range, and
/// each lse against the exact log-sum-exp of its range's scores.
TEST(attention, ranges_attended_apart_and_merged_match_the_whole_range) {
  std::mt19937 rng(test_seed());
  for (attention_fn fn : {attention_for(simd_level::scalar), attention_for(simd_level::avx2), attention_for(simd_level::avx512)}) {
    if (fn == attention_for(simd_level::avx2) && !simd_level_enabled(simd_level::avx2)) continue;
    if (fn == attention_for(simd_level::avx512) && !simd_level_enabled(simd_level::avx512)) continue;
    for (dtype f : k_formats)
    for (const auto& c : k_cases) {
      if (!fits(c, f) || c.last - c.first + 1 < 5) continue;
      attention_shape s{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.softcap};
      paged_kv kv(rng, c.n_head_kv, c.head_dim, c.page_tokens, c.last + 1, f);
      const auto q = random_query(rng, c.n_head * c.head_dim, 4.0f);
      // Cut points: n_parts - 1 distinct positions in (first, last].
      const int n_parts = std::uniform_int_distribution<int>(2, 5)(rng);
      std::vector<int> cuts;
      while (static_cast<int>(cuts.size()) < n_parts - 1) {
        const int t = std::uniform_int_distribution<int>(c.first + 1, c.last)(rng);
        if (std::find(cuts.begin(), cuts.end(), t) == cuts.end()) cuts.push_back(t);
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.insert(cuts.begin(), c.first);
      cuts.push_back(c.last + 1);
      const std::size_t qd = q.size();
      std::vector<std::vector<float>> outs(static_cast<std::size_t>(n_parts), std::vector<float>(qd)),
          lses(static_cast<std::size_t>(n_parts), std::vector<float>(static_cast<std::size_t>(c.n_head)));
      std::vector<const float*> out_ptrs, lse_ptrs;
      for (int i = 0; i < n_parts; ++i) {
        const attention_row row{q.data(), outs[i].data(), cuts[i], cuts[i + 1] - 1, lses[i].data()};
        fn(s, kv.view(), &row, 1, 0, c.n_head);
        out_ptrs.push_back(outs[i].data());
        lse_ptrs.push_back(lses[i].data());
        // The lse of this range in double.
        const int group = c.n_head / c.n_head_kv;
        for (int h = 0; h < c.n_head; ++h) {
          double mx = -INFINITY, sum = 0;
          std::vector<double> sc;
          for (int t = cuts[i]; t < cuts[i + 1]; ++t) {
            double dot = 0;
            for (int d = 0; d < c.head_dim; ++d) dot += static_cast<double>(q[static_cast<std::size_t>(h * c.head_dim + d)]) * kv.key(t, h / group, c.head_dim, d);
            dot *= s.scale;
            if (s.softcap > 0) dot = s.softcap * std::tanh(dot / s.softcap);
            sc.push_back(dot);
            mx = std::max(mx, dot);
          }
          for (double x : sc) sum += std::exp(x - mx);
          ASSERT_NEAR(lses[i][static_cast<std::size_t>(h)], mx + std::log(sum), 1e-4 * std::max(1.0, std::abs(mx)))
              << dtype_name(f) << " part " << i << " head " << h;
        }
      }
      std::vector<float> merged(qd), merged_lse(static_cast<std::size_t>(c.n_head));
      merge_attention(out_ptrs.data(), lse_ptrs.data(), n_parts, c.n_head, c.head_dim, merged.data(), merged_lse.data());
      const auto want = exact_attention(s, kv, c.first, c.last, q);
      for (std::size_t i = 0; i < qd; ++i)
        ASSERT_NEAR(merged[i], want[i], k_scalar_vs_exact) << dtype_name(f) << " " << n_parts << " parts, at " << i;
      // The union's lse: the whole range attended in one call gives it too.
      std::vector<float> whole(qd), whole_lse(static_cast<std::size_t>(c.n_head));
      const attention_row row{q.data(), whole.data(), c.first, c.last, whole_lse.data()};
      fn(s, kv.view(), &row, 1, 0, c.n_head);
      for (int h = 0; h < c.n_head; ++h)
        ASSERT_NEAR(merged_lse[static_cast<std::size_t>(h)], whole_lse[static_cast<std::size_t>(h)],
                    1e-5 * std::max(1.0f, std::abs(whole_lse[static_cast<std::size_t>(h)])))
            << dtype_name(f) << " head " << h;
    }
  }
}

/// A part that attended nothing (its lse -inf) weighs nothing in the merge.
TEST(attention, an_empty_part_weighs_nothing_in_the_merge) {
  const std::vector<float> a = {1, 2, 3, 4}, b = {100, 100, 100, 100};
  const std::vector<float> la = {0.5f, -2.0f}, lb = {-INFINITY, -INFINITY};
  const float* outs[] = {a.data(), b.data()};
  const float* lses[] = {la.data(), lb.data()};
  std::vector<float> out(4);
  merge_attention(outs, lses, 2, 2, 2, out.data());
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], a[i]);
}

}  // namespace
}  // namespace strata::kernels
