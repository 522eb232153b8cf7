#pragma once
// Messages of the compute pipeline: layer[0] -> layer[1] -> ... -> output stage -> the step's
// reply port (the scheduler). Every stage has the same inbox; the samplers' open and close go
// straight to the output stage.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/runtime/address.hpp"
#include "actors/runtime/port.hpp"
#include "src/kv/kv_cache_manager.hpp"
#include "src/sampling/generation_settings.hpp"
#include "src/sampling/sampling_params.hpp"

namespace strata::pipeline {

/// Which sequence a run of rows belongs to, and where its KV lives.
struct batch_sequence {
  std::uint64_t id = 0;
  /// KV block table of the sequence (block i holds positions [i*B, (i+1)*B)).
  std::vector<std::int32_t> blocks;
  /// The sequence's rows in the batch are [first_row, first_row + n_rows).
  std::int32_t first_row = 0;
  std::int32_t n_rows = 0;
  /// Position of the first row; the rows are consecutive positions.
  std::int32_t start_pos = 0;
  /// Draw the next token from the logits of the last row.
  bool sample = false;
  /// The sequence's slot in the recurrent layers' per-sequence state (-1 in models without such
  /// layers). A run starting at position 0 starts from a cleared slot; any other continues the
  /// state the slot holds, which is the sequence's after position start_pos - 1.
  std::int32_t state_slot = -1;
  /// Before computing, load this frozen state into the slot (by value; layer i reads
  /// restore->layers[i]): the sequence resumes from the boundary at start_pos.
  std::optional<kv::state_snapshot> restore;
  /// After computing, copy the slot's state out into forward::states (a boundary snapshot).
  bool snapshot = false;
};

/// A sequence's state after position end - 1, frozen layer by layer (kv::state_snapshot).
struct frozen_state {
  std::uint64_t seq = 0;
  std::int32_t end = 0;
  kv::state_snapshot state;
};

/// A block's KV over every layer, frozen into bytes that the message owns:
///
///   | layer 0: keys of the block's page | layer 0: values | layer 1: keys | ... | layer L-1: values |
///
/// each part one whole page in the block's format (page_tokens rows). Whenever KV leaves its layer
/// (to the SSD, or back from it) it travels as one of these, moved by value; nobody outside a
/// layer actor ever holds a pointer into its live pages.
struct frozen_block {
  std::int32_t block = -1;
  std::vector<std::byte> bytes;
};

/// Copy every layer's page of block `from` into block `to` (the cache manager's order, as it
/// makes it).
using kv::block_copy;

/// One step's batch: token rows grouped by sequence. Moved from stage to stage with the
/// activations, so no stage reads another's state.
struct batch_layout {
  std::uint64_t step = 0;
  std::vector<std::int32_t> tokens;
  std::vector<batch_sequence> seqs;
  /// Blocks whose pages every layer copies out, before computing, into forward::saved (to persist
  /// them). Before computing: a block evicted for this very step still holds its old KV then.
  std::vector<std::int32_t> save;
  /// Blocks restored from the SSD: every layer copies its part into the block's pages, after the
  /// saves and before the copies and the compute.
  std::vector<frozen_block> load;
  /// Pages every layer copies from block to block, after the saves and the loads (a block this
  /// step restores may be a source) and before the compute: a sequence starting from part of a
  /// cached block gets its own copy of it.
  std::vector<block_copy> copy;
  std::int32_t n_rows() const { return static_cast<std::int32_t>(tokens.size()); }
};

/// A drawn token with what the API reports about it.
struct sampled_token {
  std::uint64_t seq = 0;
  std::int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

/// The output stage's answer to a step: the tokens drawn, and the blocks the step's layout asked
/// to save, frozen over every layer.
struct step_done {
  std::uint64_t step = 0;
  std::vector<sampled_token> samples;
  std::vector<frozen_block> saved;
  /// The snapshots the step's sequences asked for, in layout order.
  std::vector<frozen_state> states;
};

/// Activations moving down the pipeline: n_rows x hidden floats, owned by the message.
struct forward {
  batch_layout layout;
  std::vector<float> hidden;
  /// The blocks of layout.save, filled layer by layer.
  std::vector<frozen_block> saved;
  /// Where the output stage sends the step's step_done (the scheduler that sent the step).
  actors::port<step_done> reply_to;
  /// The snapshots of the sequences with batch_sequence::snapshot, filled layer by layer.
  std::vector<frozen_state> states;
};

/// Output stage: start or stop keeping a sampler for a sequence (penalty counts, RNG).
struct open_sampler {
  std::uint64_t id = 0;
  sampling::sampling_params settings;
  /// Tokens already in the sequence (prompt), for repetition penalties.
  std::vector<std::int32_t> history;
  /// What the output must match (generation_settings::compiled_grammar), or null.
  std::shared_ptr<const grammar::compiled_grammar> grammar;
};
struct close_sampler {
  std::uint64_t id = 0;
};

using stage_inbox = std::variant<forward, open_sampler, close_sampler>;
using stage_address = actors::address<stage_inbox>;


}  // namespace strata::pipeline
