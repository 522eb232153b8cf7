#include "server/engine/stages.hpp"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "kernels/delta_rule.hpp"
#include "src/common/block_buffers.hpp"

namespace strata::engine {

layer_stage::layer_stage(std::shared_ptr<const model::model> m, int layer, const kv::block_space& pages, std::int32_t page_tokens,
                         std::shared_ptr<kernels::compute_pool> pool, std::int32_t state_slots, std::int32_t max_chunk)
    : m_(std::move(m)), layer_(layer), kv_(pages, page_tokens, m_->hp.kv_dim()), pool_(std::move(pool)) {
  const std::int32_t slots = std::max<std::int32_t>(state_slots, 1);
  if (m_->hp.recurrent(layer_)) {
    state_.emplace(m_->hp, slots, layer_);
    state_->set_rule_chunk(kernels::delta_rule_chunk_for(page_tokens));
  }
  if (m_->hp.sliding(layer_)) ring_.emplace(slots, page_tokens, m_->hp.kv_dim(), m_->hp.sliding_window, max_chunk);
  for (int il = 0; il < m_->hp.n_layer; ++il) {
    if (m_->hp.keeps_state(il)) continue;
    if (il == layer_) kv_index_ = kv_layers_;
    ++kv_layers_;
  }
}

void layer_stage::set_q4_key_means(std::shared_ptr<const model::q4_key_means> means) {
  q4_means_ = std::move(means);
  const float* m = q4_means_ ? q4_means_->layer(layer_) : nullptr;
  kv_.set_q4_key_mean(m);
  if (ring_) ring_->kv().set_q4_key_mean(m);
}

void layer_stage::run(const pipeline::batch_layout& layout, std::vector<float>& hidden) {
  const auto n = layout.n_rows();
  if (hidden.empty()) {
    hidden.resize(static_cast<std::size_t>(n) * m_->hp.n_embd);
    model::embed(*m_, layout.tokens.data(), n, hidden.data());
  }
  if (ring_) {
    run_windowed(layout, hidden.data());
    return;
  }
  rows_.clear();
  for (const auto& s : layout.seqs) {
    rows_.push_back({s.blocks.data(), static_cast<std::int32_t>(s.blocks.size()), s.first_row, s.n_rows, s.start_pos,
                     std::max(s.state_slot, 0)});
  }
  model::batch_view b{layout.tokens.data(), n, rows_};
  model::layer_forward(*m_, layer_, b, hidden.data(), kv_, *pool_, state_ ? &*state_ : nullptr);
}

void layer_stage::run_windowed(const pipeline::batch_layout& layout, float* hidden) {
  const auto n = layout.n_rows();
  rows_.clear();
  tables_.resize(std::max(tables_.size(), layout.seqs.size()));
  bool split = false;
  for (std::size_t i = 0; i < layout.seqs.size(); ++i) {
    const auto& s = layout.seqs[i];
    const std::int32_t slot = std::clamp(s.state_slot, 0, ring_->slots() - 1);
    const auto n_blocks = static_cast<std::int32_t>(s.blocks.size());
    ring_->table(slot, kv_.format_of(s.blocks.empty() ? 0 : s.blocks[0]), n_blocks, tables_[i]);
    rows_.push_back({tables_[i].data(), n_blocks, s.first_row, s.n_rows, s.start_pos, slot});
    split = split || s.n_rows > ring_->max_chunk();
  }
  const model::batch_view b{layout.tokens.data(), n, rows_};
  // The ring holds max_chunk new rows beside the window: a longer run goes through in parts.
  const std::int32_t step = split ? ring_->max_chunk() : std::max(n, 1);
  for (std::int32_t r0 = 0; r0 < n; r0 += step) {
    const std::int32_t r1 = std::min(n, r0 + step);
    model::slice_rows(b, r0, r1, part_);
    const model::batch_view sub{b.tokens + r0, r1 - r0, part_};
    model::layer_forward(*m_, layer_, sub, hidden + static_cast<std::int64_t>(r0) * m_->hp.n_embd, ring_->kv(), *pool_);
  }
  for (const auto& r : rows_)
    if (r.n_blocks > 0) ring_->advance(r.state_slot, ring_->kv().format_of(r.blocks[0]), r.start_pos + r.n_rows);
}

std::size_t layer_stage::page_bytes(std::int32_t block) const {
  return static_cast<std::size_t>(kv_.row_bytes(kv_.format_of(block)) * kv_.page_tokens());
}

void layer_stage::save_pages(std::vector<pipeline::frozen_block>& saved) {
  if (layer_ == 0) {
    // The first layer takes every block's buffer, on all the pool's threads: a fresh buffer's pages
    // are backed as it is taken, at about 2 GB/s a core, and a step saving 1 GB waited 0.5 s here.
    pool_->parallel_for(static_cast<int>(saved.size()), [&](int i, int) {
      auto& f = saved[static_cast<std::size_t>(i)];
      f.bytes = block_buffers::shared().take(page_bytes(f.block) * 2 * static_cast<std::size_t>(kv_layers_));
    });
  }
  for (auto& f : saved) {
    const std::size_t n = page_bytes(f.block);
    const std::size_t total = n * 2 * static_cast<std::size_t>(kv_layers_);
    if (kv_index_ < 0 || f.bytes.size() != total) continue;  // never: every layer holds the block in one format
    const std::size_t at = n * 2 * static_cast<std::size_t>(kv_index_);
    std::memcpy(f.bytes.data() + at, kv_.k(f.block, 0), n);
    std::memcpy(f.bytes.data() + at + n, kv_.v(f.block, 0), n);
  }
}

void layer_stage::copy_pages(const std::vector<pipeline::block_copy>& copies) {
  for (const auto& c : copies) {
    const std::size_t n = page_bytes(c.from);
    if (page_bytes(c.to) != n) continue;  // never: a copy stays within one KV format
    std::memcpy(kv_.k(c.to, 0), kv_.k(c.from, 0), n);
    std::memcpy(kv_.v(c.to, 0), kv_.v(c.from, 0), n);
  }
}

void layer_stage::load_pages(const std::vector<pipeline::frozen_block>& blocks) {
  for (const auto& f : blocks) {
    const std::size_t n = page_bytes(f.block);
    const std::size_t at = n * 2 * static_cast<std::size_t>(kv_index_);
    if (kv_index_ < 0 || f.bytes.size() != n * 2 * static_cast<std::size_t>(kv_layers_)) continue;  // checked by the scheduler
    std::memcpy(kv_.k(f.block, 0), f.bytes.data() + at, n);
    std::memcpy(kv_.v(f.block, 0), f.bytes.data() + at + n, n);
  }
}

void layer_stage::clear_state(std::int32_t slot) {
  if (state_ && slot < state_->slots()) state_->clear(slot);
  if (ring_ && slot < ring_->slots()) ring_->clear(slot);
}

void layer_stage::save_state(std::int32_t slot, std::vector<std::byte>& out) {
  if (ring_ && slot < ring_->slots()) ring_->save(slot, out);
  if (!state_ || slot >= state_->slots()) return;
  const auto* p = reinterpret_cast<const std::byte*>(state_->conv(layer_, slot));
  out.insert(out.end(), p, p + state_->layer_slot_bytes());
}

void layer_stage::load_state(std::int32_t slot, std::span<const std::byte> in) {
  if (ring_ && slot < ring_->slots()) ring_->load(slot, in);  // a copy of another shape clears the slot
  if (!state_ || slot >= state_->slots()) return;
  // A copy of another shape (never: snapshots are keyed by the model's fingerprint) starts over.
  if (in.size() != state_->layer_slot_bytes()) {
    state_->clear(slot);
    return;
  }
  std::memcpy(state_->conv(layer_, slot), in.data(), in.size());
}

output_stage::output_stage(std::shared_ptr<const model::model> m, std::shared_ptr<kernels::compute_pool> pool)
    : m_(std::move(m)), pool_(std::move(pool)) {}

void output_stage::logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) {
  out.resize(rows.size() * static_cast<std::size_t>(m_->hp.n_vocab));
  model::output_logits(*m_, hidden.data(), rows, out.data(), *pool_);
}

sequence_sampler::sequence_sampler(const pipeline::open_sampler& o) : id_(o.id), s_(o.settings, o.history) {
  if (o.grammar) grammar_.emplace(o.grammar);
}

pipeline::sampled_token sequence_sampler::draw(float* logits, std::int32_t n_vocab) {
  if (grammar_) grammar_->mask_logits(logits, n_vocab);
  auto c = s_.draw(logits, n_vocab);
  // Only an allowed token can be drawn (every other one is at -inf), unless the grammar allows
  // none: then the sequence ends rather than leave its grammar.
  if (grammar_ && !grammar_->accept(c.token)) {
    spdlog::warn("sequence {}: token {} is outside its grammar; ending it", id_, c.token);
    c.token = grammar_->stop_tokens().empty() ? c.token : grammar_->stop_tokens().front();
  }
  return pipeline::sampled_token{id_, c.token, c.logprob, std::move(c.top_logprobs)};
}

}  // namespace strata::engine
