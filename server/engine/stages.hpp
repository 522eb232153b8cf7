#pragma once
// The real model behind the pipeline's stage interfaces: one layer_stage per layer actor (it owns
// that layer's KV pages), the output stage's LM head, and the per-sequence samplers.

#include <memory>
#include <optional>
#include <vector>

#include "actors/pipeline/stage_compute.hpp"
#include "kernels/compute_pool.hpp"
#include "src/model/forward.hpp"
#include "src/grammar/grammar_matcher.hpp"
#include "src/model/layer_kv.hpp"
#include "src/model/q4_kv.hpp"
#include "src/model/window_ring.hpp"
#include "src/sampling/sampler.hpp"

namespace strata::engine {

class layer_stage final : public pipeline::layer_compute {
 public:
  /// A layer that keeps state (hparams::keeps_state) keeps `state_slots` slots of it, one per
  /// running sequence (batch_sequence::state_slot): a recurrent layer its recurrent state, a
  /// sliding-window layer the ring of its window (for steps of at most max_chunk rows of a
  /// sequence; longer runs are computed in parts).
  layer_stage(std::shared_ptr<const model::model> m, int layer, const kv::block_space& pages, std::int32_t page_tokens,
              std::shared_ptr<kernels::compute_pool> pool, std::int32_t state_slots = 0, std::int32_t max_chunk = 512);
  void run(const pipeline::batch_layout& layout, std::vector<float>& hidden) override;
  void save_pages(std::vector<pipeline::frozen_block>& saved) override;
  void copy_pages(const std::vector<pipeline::block_copy>& copies) override;
  void load_pages(const std::vector<pipeline::frozen_block>& blocks) override;
  /// A slot's state: a recurrent layer's convolution rows and delta state, as raw f32 bytes; a
  /// sliding-window layer's last window of keys and values (window_ring::save).
  void clear_state(std::int32_t slot) override;
  void save_state(std::int32_t slot, std::vector<std::byte>& out) override;
  void load_state(std::int32_t slot, std::span<const std::byte> in) override;
  /// Centers this layer's q4_0 keys with `means` (model::calibrate_q4_keys; null: none).
  void set_q4_key_means(std::shared_ptr<const model::q4_key_means> means);
  /// Backs the first n_pages pages of format f now (layer_kv::prefault); returns the bytes.
  std::size_t prefault(kv::kv_format f, std::int32_t n_pages) { return kv_index_ < 0 ? 0 : kv_.prefault(f, n_pages); }

 private:
  /// Bytes of one page of keys (or values) in the block's format.
  std::size_t page_bytes(std::int32_t block) const;

  std::shared_ptr<const model::model> m_;
  int layer_;
  /// Runs the batch through the window ring: each sequence attends over its slot's ring pages.
  void run_windowed(const pipeline::batch_layout& layout, float* hidden);

  /// A frozen block holds the pages of the layers without state only (the pages of a layer that
  /// keeps state stay unused): how many there are, and where this layer's go (-1: one with state).
  int kv_layers_ = 0;
  int kv_index_ = -1;
  model::layer_kv kv_;
  std::shared_ptr<kernels::compute_pool> pool_;
  std::shared_ptr<const model::q4_key_means> q4_means_;
  std::vector<model::seq_rows> rows_;
  std::optional<model::recurrent_state> state_;  // recurrent layers only: one slot per running sequence
  std::optional<model::window_ring> ring_;       // sliding-window layers only: one ring per running sequence
  std::vector<std::vector<std::int32_t>> tables_;  // the ring's block tables of a step's sequences
  std::vector<model::seq_rows> part_;
};

class output_stage final : public pipeline::output_compute {
 public:
  output_stage(std::shared_ptr<const model::model> m, std::shared_ptr<kernels::compute_pool> pool);
  std::int32_t n_vocab() const override { return m_->hp.n_vocab; }
  void logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) override;

 private:
  std::shared_ptr<const model::model> m_;
  std::shared_ptr<kernels::compute_pool> pool_;
};

/// One sequence's draws: the request's sampling chain, under its grammar when it has one (the
/// grammar masks the logits before the chain sees them, and follows each drawn token).
class sequence_sampler final : public pipeline::token_sampler {
 public:
  explicit sequence_sampler(const pipeline::open_sampler& o);
  pipeline::sampled_token draw(float* logits, std::int32_t n_vocab) override;

 private:
  std::uint64_t id_;
  sampling::sampler s_;
  std::optional<grammar::grammar_matcher> grammar_;
};

}  // namespace strata::engine
