// Batches of several sequences through the per-layer forward pass give each sequence the logits
// it gets alone: mixed prefill, batched decode with pages interleaved in one pool, and batches
// larger than the scratch (run in slices).

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "src/model/forward.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"
#include "src/model/synth.hpp"
#include "tests/golden/param_name.hpp"
#include "tests/golden/synth_model.hpp"

namespace strata::model {
namespace {

/// Logits of a row in a batch against the same sequence run alone, for f16 or f32 weights: only the
/// order of float sums differs.
constexpr float k_batch_vs_alone = 1e-3f;
/// The same for quantized weights. matmul rounds activations to 8 bits below k_gemm_min_m rows
/// and to bf16 from there on, so a sequence's prefill alone and inside a larger batch take
/// different roundings (each within the golden tolerance of the exact logits, 0.55 for q4_K_M).
constexpr float k_batch_vs_alone_quantized = 0.3f;

#define k_shared std::string(STRATA_SHARED_DIR)

/// Several sequences sharing one KV pool per layer; sequence i owns pages i, i + n, i + 2n, ...
/// and slot i of the recurrent layers' states.
class multi_sequence {
 public:
  multi_sequence(std::shared_ptr<const model> m, int n_seqs, std::int32_t max_tokens, std::int32_t max_rows)
      : m_(std::move(m)), scratch_(m_->hp, max_rows), pos_(static_cast<std::size_t>(n_seqs), 0) {
    if (m_->hp.has_recurrent()) state_ = std::make_unique<recurrent_state>(m_->hp, n_seqs);
    const std::int32_t pages_each = (max_tokens + k_page - 1) / k_page;
    for (int il = 0; il < m_->hp.n_layer; ++il) kv_.emplace_back(pages_each * n_seqs, k_page, m_->hp.kv_dim());
    for (int s = 0; s < n_seqs; ++s) {
      std::vector<std::int32_t> t;
      for (std::int32_t p = 0; p < pages_each; ++p) t.push_back(p * n_seqs + s);
      tables_.push_back(std::move(t));
    }
  }

  /// One step: chunks[i] are appended to sequence i (empty: the sequence sits this step out).
  /// Returns the logits of each appended chunk's last row, in sequence order.
  std::vector<std::vector<float>> step(const std::vector<std::vector<std::int32_t>>& chunks, kernels::compute_pool& pool) {
    std::vector<std::int32_t> tokens, last_rows;
    std::vector<seq_rows> seqs;
    for (std::size_t s = 0; s < chunks.size(); ++s) {
      if (chunks[s].empty()) continue;
      const auto first = static_cast<std::int32_t>(tokens.size());
      tokens.insert(tokens.end(), chunks[s].begin(), chunks[s].end());
      seqs.push_back({tables_[s].data(), static_cast<std::int32_t>(tables_[s].size()), first,
                      static_cast<std::int32_t>(chunks[s].size()), pos_[s], static_cast<std::int32_t>(s)});
      pos_[s] += static_cast<std::int32_t>(chunks[s].size());
      last_rows.push_back(static_cast<std::int32_t>(tokens.size()) - 1);
    }
    const auto n = static_cast<std::int32_t>(tokens.size());
    const hparams& h = m_->hp;
    std::vector<float> hidden(static_cast<std::size_t>(n) * h.n_embd);
    embed(m_->weights, h, tokens.data(), n, hidden.data());
    const batch_view b{tokens.data(), n, seqs};
    for (int il = 0; il < h.n_layer; ++il)
      layer_forward(m_->weights.layers[static_cast<std::size_t>(il)], h, il, b, hidden.data(), kv_[static_cast<std::size_t>(il)],
                    scratch_, pool, state_.get());
    std::vector<float> logits(last_rows.size() * static_cast<std::size_t>(h.n_vocab));
    output_logits(m_->weights, h, hidden.data(), last_rows, logits.data(), scratch_, pool);
    std::vector<std::vector<float>> out;
    for (std::size_t i = 0; i < last_rows.size(); ++i)
      out.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(i * h.n_vocab),
                       logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * h.n_vocab));
    return out;
  }

 private:
  static constexpr std::int32_t k_page = 16;
  std::shared_ptr<const model> m_;
  scratch scratch_;
  std::vector<layer_kv> kv_;
  std::unique_ptr<recurrent_state> state_;
  std::vector<std::vector<std::int32_t>> tables_;
  std::vector<std::int32_t> pos_;
};

std::vector<std::int32_t> some_tokens(std::int32_t n, std::int32_t n_vocab, std::uint32_t seed) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>((seed = seed * 1664525u + 1013904223u) >> 8) % n_vocab;
  return t;
}

float max_diff(const std::vector<float>& a, const float* b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

/// A random-weight gemma3 written once per run: six layers, of which the first five slide through
/// a window of 128 positions (the window is the context length when that is shorter than 512) and
/// the sixth attends globally, each kind with its own rotary base.
constexpr const char* k_synth_gemma3 = "synth-gemma3-f16";

/// The qwen35 hybrid of tests/golden/synth (Gated DeltaNet layers, gated attention every fourth).
constexpr const char* k_synth_qwen35 = "synth-qwen35-f32";

/// The qwen3moe mixture of experts of tests/golden/synth (eight experts, two per token): batched
/// rows share the experts they chose.
constexpr const char* k_synth_qwen3moe = "synth-qwen3moe-f32";

/// The gpt-oss of tests/golden/synth: attention sinks, every other layer through a window of 128
/// positions (the 300-token prompt passes it), YaRN, biased experts.
constexpr const char* k_synth_gpt_oss = "synth-gpt-oss-f32";

/// The granitehybrid of tests/golden/synth (Mamba-2 layers, attention every fourth).
constexpr const char* k_synth_granitehybrid = "synth-granitehybrid-f32";

/// The file of a test model: one of ../shared/models, or of the k_synth_ models above.
std::string model_file(const std::string& name) {
  if (name == k_synth_qwen35) return golden_testing::synth_model("qwen35", k_shared);
  if (name == k_synth_qwen3moe) return golden_testing::synth_model("qwen3moe", k_shared);
  if (name == k_synth_gpt_oss) return golden_testing::synth_model("gpt-oss", k_shared);
  if (name == k_synth_granitehybrid) return golden_testing::synth_model("granitehybrid", k_shared);
  if (name != k_synth_gemma3) return k_shared + "/models/" + name + ".gguf";
  struct temp_file {
    std::filesystem::path path;
    ~temp_file() { std::filesystem::remove(path); }
  };
  static const temp_file file = [] {
    synth_options o;
    o.arch = "gemma3";
    o.layers = 6;
    o.hidden = 256;
    o.heads = 4;
    o.kv_heads = 1;
    o.ffn = 512;
    o.vocab = "builtin";
    o.ctx = 128;
    o.seed = 3;
    o.out = std::filesystem::temp_directory_path() / ("strata_batch_" + std::to_string(::getpid()) + "_gemma3.gguf");
    if (!synthesize(o)) o.out.clear();
    return temp_file{o.out};
  }();
  return file.path.string();
}

class batch : public ::testing::TestWithParam<std::string> {};

float tolerance_for(const std::string& name) {
  const bool float_weights = name.find("-f16") != std::string::npos || name.find("-f32") != std::string::npos;
  return float_weights ? k_batch_vs_alone : k_batch_vs_alone_quantized;
}

TEST_P(batch, sequences_batched_together_get_the_logits_they_get_alone) {
  auto m = model::load(model_file(GetParam()));
  ASSERT_TRUE(m) << m.err().message;
  const std::int32_t nv = (*m)->hp.n_vocab;
  const float tol = tolerance_for(GetParam());
  kernels::compute_pool pool(2);
  // Lengths that cross page boundaries; the last one passes gemma2's and the gemma3 model's sliding
  // windows.
  const std::vector<std::int32_t> lengths{5, 40, 300};
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t s = 0; s < lengths.size(); ++s) prompts.push_back(some_tokens(lengths[s], nv, 7u + static_cast<std::uint32_t>(s)));
  const int n_decode = 3;

  // Alone: prefill, then n_decode steps of one token each.
  std::vector<std::vector<std::vector<float>>> alone(prompts.size());
  std::vector<std::vector<std::int32_t>> next(prompts.size());
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    session one(*m, pool, 400);
    auto r = one.append(prompts[s], false);
    ASSERT_TRUE(r) << r.err().message;
    alone[s].push_back(*r);
    for (int d = 0; d < n_decode; ++d) {
      const std::int32_t t = some_tokens(1, nv, 100u + static_cast<std::uint32_t>(s * 10 + d))[0];
      next[s].push_back(t);
      auto rd = one.append(std::span<const std::int32_t>(&t, 1), false);
      ASSERT_TRUE(rd) << rd.err().message;
      alone[s].push_back(*rd);
    }
  }

  // Together: one mixed prefill step (with a scratch smaller than the step, so it runs in slices),
  // then batched decode steps of one row per sequence.
  multi_sequence all(*m, static_cast<int>(prompts.size()), 400, 64);
  auto got = all.step(prompts, pool);
  ASSERT_EQ(got.size(), prompts.size());
  for (std::size_t s = 0; s < prompts.size(); ++s)
    EXPECT_LE(max_diff(got[s], alone[s][0].data()), tol) << "prefill of sequence " << s;
  for (int d = 0; d < n_decode; ++d) {
    std::vector<std::vector<std::int32_t>> rows;
    for (std::size_t s = 0; s < prompts.size(); ++s) rows.push_back({next[s][static_cast<std::size_t>(d)]});
    auto dec = all.step(rows, pool);
    for (std::size_t s = 0; s < prompts.size(); ++s)
      EXPECT_LE(max_diff(dec[s], alone[s][static_cast<std::size_t>(d + 1)].data()), tol)
          << "decode step " << d << " of sequence " << s;
  }
}

/// One decode row over a long context: with two workers its positions are split between them and
/// the two halves' results merged (attend_one_row_split); with one, that worker attends the same
/// spans in turn.
/// Long enough for the split on the tiny models (512 positions x 128 query values) and for each
/// worker to take its range in several chunks (attend_one_row_split), across a sliding window on
/// gemma2's alternate layers and gemma3's five of six, and on the quantized model.
TEST_P(batch, one_decode_row_split_over_the_workers_gets_the_logits_of_one_worker) {
  auto m = model::load(model_file(GetParam()));
  ASSERT_TRUE(m) << m.err().message;
  const std::int32_t nv = (*m)->hp.n_vocab;
  kernels::compute_pool one_worker(1), two_workers(2);
  const auto prompt = some_tokens(2300, nv, 11u);
  session a(*m, one_worker, 2320), b(*m, two_workers, 2320);
  auto ra = a.append(prompt, false);
  auto rb = b.append(prompt, false);
  ASSERT_TRUE(ra && rb);
  for (int d = 0; d < 4; ++d) {
    const std::int32_t t = some_tokens(1, nv, 200u + static_cast<std::uint32_t>(d))[0];
    ra = a.append(std::span<const std::int32_t>(&t, 1), false);
    rb = b.append(std::span<const std::int32_t>(&t, 1), false);
    ASSERT_TRUE(ra && rb);
    EXPECT_LE(max_diff(*ra, rb->data()), k_batch_vs_alone) << "decode step " << d;
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, batch,
                         ::testing::Values("tiny-qwen2-gpt2-f16", "tiny-gemma2-spm-f16", "small-llama-spm-q4_k_m", k_synth_gemma3,
                                           k_synth_qwen35, k_synth_qwen3moe, k_synth_gpt_oss, k_synth_granitehybrid),
                         golden_testing::model_param_name);

}  // namespace
}  // namespace strata::model
