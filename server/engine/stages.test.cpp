// The layer stages of a sliding-window model (gemma3, gpt-oss): a sliding-window layer keeps only
// a ring of its window per state slot, and the logits come out as a session's that keeps every
// layer's KV over the whole context and masks to the window; a ring copied out at a boundary and
// loaded into another slot goes on as if never interrupted.

#include "server/engine/stages.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "src/model/session.hpp"
#include "src/model/synth.hpp"
#include "src/model/window_ring.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::engine {
namespace {

constexpr std::int32_t k_page = 16;
/// The stages and the session sum in the same order for the same chunks; only a run split into
/// parts of max_chunk rows rounds differently (bf16 activations above a few rows).
constexpr float k_same_chunks = 1e-4f;
constexpr float k_other_chunks = 2e-2f;

struct arch_case {
  const char* arch;
  int layers;
  std::int32_t tokens;  // well past the window (gemma3: 512, gpt-oss: 128)
};

std::shared_ptr<const model::model> synth_model(const arch_case& c) {
  model::synth_options o;
  o.arch = c.arch;
  o.layers = c.layers;
  o.hidden = 64;
  o.heads = 2;
  o.kv_heads = 1;
  o.head_dim = 32;
  o.ffn = 128;
  o.vocab = "builtin";
  o.ctx = 4096;
  o.seed = 11;
  o.out = std::filesystem::temp_directory_path() / ("strata_stages_" + std::to_string(::getpid()) + "_" + c.arch + ".gguf");
  EXPECT_TRUE(model::synthesize(o));
  auto m = model::model::load(o.out);
  std::filesystem::remove(o.out);
  EXPECT_TRUE(m) << m.err().message;
  return m ? *m : nullptr;
}

/// Every layer as the engine runs it, with pages of one format for one sequence per slot.
class stage_stack {
 public:
  stage_stack(std::shared_ptr<const model::model> m, kernels::compute_pool& pool, kv::kv_format f, std::int32_t max_tokens,
              std::int32_t slots, std::int32_t max_chunk)
      : m_(m), out_(m, std::shared_ptr<kernels::compute_pool>(&pool, [](auto*) {})) {
    const std::int32_t pages = (max_tokens + k_page - 1) / k_page;
    space_.capacity[static_cast<std::size_t>(kv::format_index(f))] = pages * slots;
    auto p = std::shared_ptr<kernels::compute_pool>(&pool, [](auto*) {});
    for (int il = 0; il < m->hp.n_layer; ++il) layers_.push_back(std::make_unique<layer_stage>(m, il, space_, k_page, p, slots, max_chunk));
    for (std::int32_t s = 0; s < slots; ++s) {
      std::vector<std::int32_t> t(static_cast<std::size_t>(pages));
      for (std::int32_t i = 0; i < pages; ++i) t[static_cast<std::size_t>(i)] = space_.base(f) + s * pages + i;
      tables_.push_back(std::move(t));
    }
  }

  /// Appends tokens to the sequence in `slot` that is at position pos, in steps of `chunk` rows,
  /// its KV pages those of slot `pages` (default: its own); returns every appended row's logits.
  std::vector<float> append(std::int32_t slot, std::int32_t pos, std::span<const std::int32_t> tokens, std::int32_t chunk,
                            std::int32_t pages = -1) {
    std::vector<float> all;
    for (std::size_t done = 0; done < tokens.size();) {
      const auto n = static_cast<std::int32_t>(std::min<std::size_t>(static_cast<std::size_t>(chunk), tokens.size() - done));
      pipeline::batch_layout l;
      l.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(done), tokens.begin() + static_cast<std::ptrdiff_t>(done) + n);
      pipeline::batch_sequence s;
      s.n_rows = n;
      s.start_pos = pos;
      s.state_slot = slot;
      const auto& t = tables_[static_cast<std::size_t>(pages < 0 ? slot : pages)];
      s.blocks.assign(t.begin(), t.begin() + (pos + n + k_page - 1) / k_page);
      l.seqs.push_back(std::move(s));
      std::vector<float> hidden;
      for (auto& layer : layers_) {
        if (pos == 0) layer->clear_state(slot);
        layer->run(l, hidden);
      }
      std::vector<std::int32_t> rows(static_cast<std::size_t>(n));
      std::iota(rows.begin(), rows.end(), 0);
      std::vector<float> logits;
      out_.logits(hidden, rows, logits);
      all.insert(all.end(), logits.begin(), logits.end());
      pos += n;
      done += static_cast<std::size_t>(n);
    }
    return all;
  }

  std::vector<std::vector<std::byte>> save(std::int32_t slot) {
    std::vector<std::vector<std::byte>> out(layers_.size());
    for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->save_state(slot, out[i]);
    return out;
  }
  void load(std::int32_t slot, const std::vector<std::vector<std::byte>>& in) {
    for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->load_state(slot, in[i]);
  }

 private:
  std::shared_ptr<const model::model> m_;
  kv::block_space space_;
  std::vector<std::unique_ptr<layer_stage>> layers_;
  output_stage out_;
  std::vector<std::vector<std::int32_t>> tables_;
};

std::vector<std::int32_t> random_tokens(std::int32_t n, std::int32_t n_vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<unsigned>(n_vocab));
  return t;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

class windowed_stages : public ::testing::TestWithParam<arch_case> {};

TEST_P(windowed_stages, a_ring_of_the_window_gives_the_logits_of_a_session_that_keeps_the_whole_context) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->hp.has_state());
  const unsigned seed = test_seed();
  const std::int32_t n = GetParam().tokens;
  const auto tokens = random_tokens(n, m->hp.n_vocab, seed);
  kernels::compute_pool pool(2);
  for (kv::kv_format f : kv::k_kv_formats) {
    // Prefill in chunks of 40, then decode row by row: the ring holds 40 new rows beside the window.
    model::session ref(m, pool, n, k_page, 512, f);
    std::vector<float> want = *ref.append(std::span(tokens).first(static_cast<std::size_t>(n - 24)), true, 40);
    for (std::int32_t i = n - 24; i < n; ++i) {
      auto l = ref.append(std::span(tokens).subspan(static_cast<std::size_t>(i), 1), true);
      want.insert(want.end(), l->begin(), l->end());
    }
    stage_stack st(m, pool, f, n, 3, 40);
    std::vector<float> got = st.append(1, 0, std::span(tokens).first(static_cast<std::size_t>(n - 24)), 40);
    for (std::int32_t i = n - 24; i < n; ++i) {
      auto l = st.append(1, i, std::span(tokens).subspan(static_cast<std::size_t>(i), 1), 1);
      got.insert(got.end(), l.begin(), l.end());
    }
    EXPECT_LE(max_diff(got, want), k_same_chunks) << "seed " << seed << " kv_bits " << static_cast<int>(f);
  }
}

TEST_P(windowed_stages, steps_longer_than_the_ring_holds_go_through_in_parts_with_the_same_logits) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  const unsigned seed = test_seed();
  const std::int32_t n = GetParam().tokens;
  const auto tokens = random_tokens(n, m->hp.n_vocab, seed);
  kernels::compute_pool pool(2);
  model::session ref(m, pool, n, k_page, 512);
  const std::vector<float> want = *ref.append(tokens, true, 512);
  stage_stack st(m, pool, kv::kv_format::f16, n, 1, 24);
  EXPECT_LE(max_diff(st.append(0, 0, tokens, 512), want), k_other_chunks) << "seed " << seed;
}

TEST_P(windowed_stages, a_window_saved_at_a_boundary_and_loaded_into_another_slot_goes_on_as_the_uninterrupted_sequence) {
  auto m = synth_model(GetParam());
  ASSERT_TRUE(m);
  const unsigned seed = test_seed();
  const std::int32_t n = GetParam().tokens, cut = n / 2 / k_page * k_page + k_page;
  const auto tokens = random_tokens(n, m->hp.n_vocab, seed);
  kernels::compute_pool pool(2);
  for (kv::kv_format f : kv::k_kv_formats) {
    stage_stack st(m, pool, f, n, 3, 32);
    st.append(0, 0, std::span(tokens).first(static_cast<std::size_t>(cut)), 32);
    const auto frozen = st.save(0);
    // Slot 0 goes on through the rest; slot 2, after a foreign sequence used it, from the copy (and
    // the global layers' pages up to the boundary, as a restore gets the chain's blocks).
    const auto rest = std::span(tokens).subspan(static_cast<std::size_t>(cut));
    const auto want = st.append(0, cut, rest, 32);
    st.append(2, 0, random_tokens(cut + 40, m->hp.n_vocab, seed + 1), 32);
    st.load(2, frozen);
    EXPECT_EQ(max_diff(st.append(2, cut, rest, 32, 0), want), 0.0f) << "seed " << seed << " kv_bits " << static_cast<int>(f);
  }
}

INSTANTIATE_TEST_SUITE_P(sliding_models, windowed_stages,
                         ::testing::Values(arch_case{"gemma3", 6, 1200}, arch_case{"gpt-oss", 2, 420}),
                         [](const auto& info) { return std::string(info.param.arch == std::string("gemma3") ? "gemma3" : "gpt_oss"); });

TEST(window_ring, a_saved_window_holds_at_most_window_minus_one_positions_however_long_the_sequence) {
  model::window_ring r(2, k_page, 64, 100, 48);
  EXPECT_EQ(r.ring_pages(), (100 + 48 - 1 + k_page - 1) / k_page);
  EXPECT_EQ(r.saved_bytes(kv::kv_format::f16, 10), r.saved_bytes(kv::kv_format::f16, 0) + 2 * 10 * 128);
  EXPECT_EQ(r.saved_bytes(kv::kv_format::f16, 5000), r.saved_bytes(kv::kv_format::f16, 99));
  r.advance(1, kv::kv_format::q8_0, 5000);
  std::vector<std::byte> out;
  r.save(1, out);
  EXPECT_EQ(out.size(), r.saved_bytes(kv::kv_format::q8_0, 5000));
  EXPECT_TRUE(r.load(0, out));
  EXPECT_EQ(r.end(0), 5000);
}

TEST(window_ring, a_copy_of_another_shape_or_a_damaged_one_clears_the_slot) {
  model::window_ring r(1, k_page, 64, 100, 48);
  model::window_ring other(1, k_page, 64, 50, 48);
  other.advance(0, kv::kv_format::f16, 300);
  std::vector<std::byte> out;
  other.save(0, out);
  r.advance(0, kv::kv_format::f16, 77);
  EXPECT_FALSE(r.load(0, out));
  EXPECT_EQ(r.end(0), 0);
  r.advance(0, kv::kv_format::f16, 77);
  out.clear();
  r.save(0, out);
  out.pop_back();
  EXPECT_FALSE(r.load(0, out));
  EXPECT_FALSE(r.load(0, {}));
  EXPECT_EQ(r.end(0), 0);
}

}  // namespace
}  // namespace strata::engine
