// Prefix reuse across sliding-window layers (gemma2: a window of 32 on alternate layers). Every
// layer keeps the pages of every position, so a cached prefix ending at any block boundary holds
// exactly what a sliding layer needs to resume there (the window's last positions are the last
// pages of the prefix): no snapshot of window state is needed. Resuming a prompt longer than the
// window from each block boundary gives the logits of the cold run.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "src/model/forward.hpp"
#include "src/model/model.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

#define k_shared std::string(STRATA_SHARED_DIR)

constexpr std::int32_t k_page = 16;
/// f16 weights: a chunk of a different size only changes the order of float sums.
constexpr float k_resume_vs_cold = 1e-3f;

TEST(window_reuse, resuming_from_any_block_boundary_gives_the_cold_logits) {
  auto m = model::load(k_shared + "/models/tiny-gemma2-spm-f16.gguf");
  ASSERT_TRUE(m) << m.err().message;
  const hparams& h = (*m)->hp;
  ASSERT_GT(h.sliding_window, 0);
  const std::int32_t n = 6 * h.sliding_window + 5;  // several windows, ending inside a page
  const auto seed = test_seed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(h.n_vocab));

  const std::int32_t pages_per_seq = (n + k_page - 1) / k_page;
  std::vector<layer_kv> kv;
  for (int il = 0; il < h.n_layer; ++il) kv.emplace_back(2 * pages_per_seq, k_page, h.kv_dim());
  scratch s(h, n);
  kernels::compute_pool pool(2);

  // Runs tokens[start, n) of a sequence with this block table; returns the last row's logits.
  auto run = [&](const std::vector<std::int32_t>& table, std::int32_t start) {
    const std::int32_t rows = n - start;
    std::vector<float> hidden(static_cast<std::size_t>(rows) * h.n_embd);
    embed((*m)->weights, h, tokens.data() + start, rows, hidden.data());
    const seq_rows sq{table.data(), static_cast<std::int32_t>(table.size()), 0, rows, start};
    const batch_view b{tokens.data() + start, rows, std::span<const seq_rows>(&sq, 1)};
    for (int il = 0; il < h.n_layer; ++il)
      layer_forward((*m)->weights.layers[static_cast<std::size_t>(il)], h, il, b, hidden.data(), kv[static_cast<std::size_t>(il)], s, pool);
    std::vector<float> logits(static_cast<std::size_t>(h.n_vocab));
    const std::int32_t last = rows - 1;
    output_logits((*m)->weights, h, hidden.data(), std::span<const std::int32_t>(&last, 1), logits.data(), s, pool);
    return logits;
  };

  std::vector<std::int32_t> cold_table(static_cast<std::size_t>(pages_per_seq));
  std::iota(cold_table.begin(), cold_table.end(), 0);
  const auto cold = run(cold_table, 0);

  for (std::int32_t boundary = k_page; boundary < n; boundary += k_page) {
    // The cached prefix's pages, then fresh pages for the rest (the cold pages are never written).
    std::vector<std::int32_t> table(cold_table.begin(), cold_table.begin() + boundary / k_page);
    for (std::int32_t p = boundary / k_page; p < pages_per_seq; ++p) table.push_back(pages_per_seq + p);
    const auto warm = run(table, boundary);
    float diff = 0;
    for (std::size_t i = 0; i < cold.size(); ++i) diff = std::max(diff, std::fabs(cold[i] - warm[i]));
    EXPECT_LE(diff, k_resume_vs_cold) << "resumed at position " << boundary << " of " << n << " (window " << h.sliding_window << ")";
  }
}

}  // namespace
}  // namespace strata::model
