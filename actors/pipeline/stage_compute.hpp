#pragma once
// The computations behind the pipeline's stages, as interfaces: the engine implements them for
// real models, and the actor tests use small stand-ins.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "actors/pipeline/messages.hpp"

namespace strata::pipeline {

/// One transformer layer with its weights view and its KV pages. Owned by exactly one layer actor.
class layer_compute {
 public:
  virtual ~layer_compute() = default;
  /// Transforms the batch's hidden states in place (n_rows x hidden), writing this layer's KV for
  /// the batch's positions. The first layer also embeds: `hidden` arrives empty.
  virtual void run(const batch_layout& layout, std::vector<float>& hidden) = 0;
  /// Appends this layer's keys and values of each block saved[i].block to saved[i].bytes (see
  /// frozen_block). Stages without pages of their own append nothing.
  virtual void save_pages(std::vector<frozen_block>& saved) { (void)saved; }
  /// Copies this layer's page of each copy's `from` block over its `to` block's.
  virtual void copy_pages(const std::vector<block_copy>& copies) { (void)copies; }
  /// Copies this layer's part of each frozen block into the block's pages.
  virtual void load_pages(const std::vector<frozen_block>& blocks) { (void)blocks; }
  /// The per-sequence state this layer keeps beyond its KV pages (none by default), by slot: a
  /// slot starts over (position 0), is copied out by value (appended to `out`, an opaque byte
  /// range only this layer reads back), or is loaded from such a copy.
  virtual void clear_state(std::int32_t slot) { (void)slot; }
  virtual void save_state(std::int32_t slot, std::vector<std::byte>& out) { (void)slot, (void)out; }
  virtual void load_state(std::int32_t slot, std::span<const std::byte> in) { (void)slot, (void)in; }
};

/// The final norm and LM head. Owned by the output actor.
class output_compute {
 public:
  virtual ~output_compute() = default;
  virtual std::int32_t n_vocab() const = 0;
  /// Logits of the given rows of `hidden`, row after row, into `logits` (rows.size() x n_vocab).
  virtual void logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows,
                      std::vector<float>& logits) = 0;
};

}  // namespace strata::pipeline

namespace strata::pipeline {

/// A sequence's sampler: draws the next token from its logits (which it may modify in place)
/// and remembers what it drew (for penalties).
class token_sampler {
 public:
  virtual ~token_sampler() = default;
  virtual sampled_token draw(float* logits, std::int32_t n_vocab) = 0;
};

/// Makes the sampler for a newly opened sequence.
using sampler_factory = std::function<std::unique_ptr<token_sampler>(const open_sampler&)>;

}  // namespace strata::pipeline
