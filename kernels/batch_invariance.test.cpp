// Batch invariance: a row's result must not depend on how many other rows share its call. The
// engine computes a prompt's rows in prefill chunks of any size and a reply's rows one at a time
// (decode, alone or beside other sequences); a prefix cached from one of these and recomputed by
// another must give the same bits, or a KV format whose quantization has a discontinuous choice
// (q4_0's fitted scales) turns last-bit differences into other codes. Each test computes the same
// rows through every path (GEMV, GEMM tiles, packed 16-row groups, grouped experts; attention in
// chunks of 1, 7 and 64 rows; one row over its spans apart and folded) on every SIMD level this
// CPU has, and lists every place where the bits part before failing.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/matmul.hpp"
#include "kernels/packed_x16.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

constexpr dtype k_types[] = {dtype::f32,  dtype::f16,  dtype::bf16,   dtype::q4_0, dtype::q4_1, dtype::q5_0, dtype::q5_1,
                             dtype::q8_0, dtype::iq4_nl, dtype::q4_k, dtype::q5_k, dtype::q6_k, dtype::mxfp4};
constexpr simd_level k_levels[] = {simd_level::scalar, simd_level::avx2, simd_level::avx512};

/// The rows a chunked computation covers: [0, total) in chunks of `chunk` rows.
template <class Fn>
void in_chunks(int total, int chunk, Fn&& fn) {
  for (int r0 = 0; r0 < total; r0 += chunk) fn(r0, std::min(chunk, total - r0));
}

/// Collects where two results part, so that one run reports every path that differs.
struct mismatches {
  std::vector<std::string> where;
  void check(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
    if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0) return;
    std::size_t i = 0;
    while (std::memcmp(&want[i], &got[i], sizeof(float)) == 0) ++i;
    std::ostringstream s;
    s << what << ": first at " << i << " (" << want[i] << " vs " << got[i] << ")";
    where.push_back(s.str());
  }
  std::string report() const {
    std::string r;
    for (const auto& w : where) r += "  " + w + "\n";
    return r;
  }
};

struct weights {
  std::vector<std::byte> w, packed;  // packed: the packable types, pack_x16
  std::vector<float> x;
};

weights make_weights(dtype t, std::int64_t rows, std::int64_t k, std::int64_t m, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  weights p;
  std::vector<float> wf(static_cast<std::size_t>(rows * k));
  for (auto& v : wf) v = dist(gen) * 0.05f;
  const std::size_t stride = row_bytes(t, k);
  p.w.resize(stride * static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * k, p.w.data() + static_cast<std::size_t>(r) * stride, k);
  p.x.resize(static_cast<std::size_t>(m * k));
  for (auto& v : p.x) v = dist(gen);
  if (x16_packable(t)) {
    p.packed.resize(p.w.size());
    pack_x16(t, p.w.data(), rows, k, p.packed.data());
  }
  return p;
}

/// Every weight type and level: 64 activation rows in one call against the same rows in calls of
/// 1, 7 and 16 rows (GEMV, small and large GEMM tiles, the float FMA tiles from k_gemm_min_m), on
/// one thread and two, with the packable types also packed (pack_x16); and rows of grouped experts
/// (1, 7 and 20 rows per expert) against each row alone through its expert's matrix, in the GGUF
/// layout and packed.
TEST(batch_invariance, a_matmul_row_gets_the_same_bits_in_every_batch_size_and_path) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  compute_pool one(1), two(2);
  const std::int64_t rows = 70, k = 512;  // 70: whole 16-row blocks and a remainder
  constexpr int m = 64;
  mismatches bad;
  for (simd_level level : k_levels) {
    if (!simd_level_enabled(level)) continue;
    const kernel_table& kt = kernels_for(level);
    for (dtype t : k_types) {
      const weights p = make_weights(t, rows, k, m, gen);
      for (bool packed : {false, true}) {
        if (packed && (!x16_packable(t) || kt.packed_gemm[dtype_slot(t)] == nullptr)) continue;
        const void* pk = packed ? p.packed.data() : nullptr;
        const std::string name = std::string(simd_level_name(level)) + " " + dtype_name(t) + (packed ? " packed" : "");
        std::vector<float> whole(static_cast<std::size_t>(m * rows));
        matmul(two, kt, t, p.w.data(), rows, k, p.x.data(), m, whole.data(), pk);
        for (int chunk : {1, 7, 16}) {
          for (compute_pool* pool : {&one, &two}) {
            std::vector<float> parts(whole.size());
            in_chunks(m, chunk, [&](int r0, int n) {
              matmul(*pool, kt, t, p.w.data(), rows, k, p.x.data() + r0 * k, n, parts.data() + r0 * rows, pk);
            });
            bad.check(whole, parts, name + ": 64 rows vs chunks of " + std::to_string(chunk) + " on " +
                                        std::to_string(pool->size()) + " thread(s)");
          }
        }
      }
      // Grouped experts: expert e's matrix is rows [e * rows, (e + 1) * rows) of a stacked weight.
      const std::int64_t experts = 3, er = 20;
      const weights g = make_weights(t, experts * er, k, 28, gen);
      const std::vector<expert_rows> groups{{2, 0, 1}, {0, 1, 7}, {1, 8, 20}};
      std::vector<float> grouped(static_cast<std::size_t>(28 * er)), alone(grouped.size());
      const grouped_out outs[] = {{t, g.w.data(), er, grouped.data()}};
      matmul_grouped(two, kt, outs, groups, k, g.x.data());
      const std::size_t stride = row_bytes(t, k);
      for (const expert_rows& e : groups)
        for (std::int64_t i = e.first; i < e.first + e.count; ++i)
          matmul(two, kt, t, g.w.data() + static_cast<std::size_t>(e.expert * er) * stride, er, k, g.x.data() + i * k, 1,
                 alone.data() + i * er);
      bad.check(alone, grouped, std::string(simd_level_name(level)) + " " + dtype_name(t) + ": grouped experts vs each row alone");
      if (!x16_packable(t) || kt.packed_gemm[dtype_slot(t)] == nullptr) continue;
      // The same with each expert's matrix packed on its own (16 rows and 4 left over), against
      // each row alone through the dense path's packed product of its expert.
      std::vector<std::byte> packed(g.w.size());
      for (std::int64_t e = 0; e < experts; ++e)
        pack_x16(t, g.w.data() + static_cast<std::size_t>(e * er) * stride, er, k, packed.data() + static_cast<std::size_t>(e * er) * stride);
      const grouped_out packed_outs[] = {{t, g.w.data(), er, grouped.data(), packed.data()}};
      matmul_grouped(two, kt, packed_outs, groups, k, g.x.data());
      for (const expert_rows& e : groups)
        for (std::int64_t i = e.first; i < e.first + e.count; ++i) {
          const std::size_t at = static_cast<std::size_t>(e.expert * er) * stride;
          matmul(two, kt, t, g.w.data() + at, er, k, g.x.data() + i * k, 1, alone.data() + i * er, packed.data() + at);
        }
      bad.check(alone, grouped, std::string(simd_level_name(level)) + " " + dtype_name(t) + ": packed grouped experts vs each row alone");
    }
  }
  EXPECT_TRUE(bad.where.empty()) << "seed " << seed << ": results that are not bit-identical:\n" << bad.report();
}

/// Random keys and values of one sequence in one KV format, over shuffled pages.
struct sequence_kv {
  sequence_kv(std::mt19937& rng, int n_head_kv, int head_dim, int page_tokens, int n_positions, dtype format) {
    const int kv_dim = n_head_kv * head_dim;
    const int n_pages = (n_positions + page_tokens - 1) / page_tokens;
    row = static_cast<std::int64_t>(kv_dim) / block_elements(format) * static_cast<std::int64_t>(block_bytes(format));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(kv_dim));
    for (auto* buf : {&k, &v}) {
      buf->resize(static_cast<std::size_t>(n_pages) * page_tokens * static_cast<std::size_t>(row));
      for (std::size_t r = 0; r < static_cast<std::size_t>(n_pages) * page_tokens; ++r) {
        for (auto& e : x) e = u(rng);
        quantize_row(format, x.data(), buf->data() + r * static_cast<std::size_t>(row), kv_dim);
      }
    }
    for (int i = 0; i < n_pages; ++i) blocks.push_back(i);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    view = {k.data(), v.data(), page_tokens * row, row, row / n_head_kv, page_tokens, blocks.data(), 0, format};
  }
  std::int64_t row = 0;
  std::vector<std::byte> k, v;
  std::vector<std::int32_t> blocks;
  kv_page_view view;
};

struct attention_shape_case {
  int n_head, n_head_kv, head_dim, page_tokens, start, window;
  float softcap;
};

constexpr attention_shape_case k_attention_cases[] = {
    {9, 3, 64, 16, 580, 0, 0.0f},     // SmolLM2's heads, pages of 16, past two spans
    {4, 1, 256, 32, 300, 0, 0.0f},    // Gemma 3's long heads
    {4, 1, 256, 32, 300, 100, 30.0f}, // a sliding window starting mid-tile, soft-capped
    {4, 2, 64, 100, 590, 0, 0.0f},    // pages of a size that is no power of two
    {2, 1, 80, 48, 200, 37, 0.0f},    // a head length that is no multiple of 32, a window
};

/// Rows start .. start + 63 of a prefill: in one call of 64 rows, in calls of 7 and in calls of
/// 1 (decode), all over the same cached positions; and the last row attended span by span
/// (attention_span), each span apart, and folded in order (fold_attention), as a decode row split
/// over the workers is. Every level and KV format; all bit-identical.
TEST(batch_invariance, an_attention_row_gets_the_same_bits_in_every_chunk_size) {
  const unsigned seed = test_seed();
  std::mt19937 rng(seed);
  mismatches bad;
  constexpr int n_rows = 64;
  for (simd_level level : k_levels) {
    if (!simd_level_enabled(level)) continue;
    const attention_fn fn = attention_for(level);
    for (dtype f : {dtype::f16, dtype::q8_0, dtype::q4_0}) {
      for (const auto& c : k_attention_cases) {
        if (f != dtype::f16 && c.head_dim % 32 != 0) continue;
        const attention_shape s{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.softcap};
        const sequence_kv kv(rng, c.n_head_kv, c.head_dim, c.page_tokens, c.start + n_rows, f);
        const std::size_t qd = static_cast<std::size_t>(c.n_head * c.head_dim);
        std::uniform_real_distribution<float> u(-4.0f, 4.0f);
        std::vector<float> q(qd * n_rows);
        for (auto& x : q) x = u(rng);
        auto run = [&](int chunk) {
          std::vector<float> out(q.size());
          in_chunks(n_rows, chunk, [&](int r0, int n) {
            std::vector<attention_row> rows;
            for (int r = r0; r < r0 + n; ++r) {
              const int pos = c.start + r;
              rows.push_back({q.data() + r * qd, out.data() + r * qd, c.window > 0 ? std::max(0, pos - c.window + 1) : 0, pos});
            }
            fn(s, kv.view, rows.data(), n, 0, c.n_head);
          });
          return out;
        };
        std::ostringstream name;
        name << simd_level_name(level) << " " << dtype_name(f) << " heads " << c.n_head << "/" << c.n_head_kv << "x" << c.head_dim
             << " pages of " << c.page_tokens << " window " << c.window;
        const auto whole = run(n_rows);
        bad.check(whole, run(7), name.str() + ": 64 rows vs chunks of 7");
        bad.check(whole, run(1), name.str() + ": 64 rows vs one row at a time");
        // The last row over its spans, each attended apart, folded from the first.
        const int pos = c.start + n_rows - 1, first = c.window > 0 ? pos - c.window + 1 : 0;
        const std::int32_t span = attention_span(kv.view);
        std::vector<float> folded(qd, 0.0f), lse(static_cast<std::size_t>(c.n_head), -INFINITY);
        std::vector<float> part(qd), part_lse(lse.size());
        for (std::int32_t lo = first; lo <= pos; lo = (lo / span + 1) * span) {
          const attention_row row{q.data() + (n_rows - 1) * qd, part.data(), lo, std::min(pos, (lo / span + 1) * span - 1), part_lse.data()};
          fn(s, kv.view, &row, 1, 0, c.n_head);
          fold_attention(folded.data(), lse.data(), part.data(), part_lse.data(), c.n_head, c.head_dim);
        }
        bad.check(std::vector<float>(whole.end() - static_cast<std::ptrdiff_t>(qd), whole.end()), folded,
                  name.str() + ": the last row vs its spans folded");
      }
    }
  }
  EXPECT_TRUE(bad.where.empty()) << "seed " << seed << ": results that are not bit-identical:\n" << bad.report();
}

}  // namespace
}  // namespace strata::kernels
