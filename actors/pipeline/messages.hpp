#pragma once
// Messages of the compute pipeline: layer[0] -> layer[1] -> ... -> output stage -> scheduler.
// Every stage has the same inbox; a layer ignores what only the output stage needs.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "actors/runtime/address.hpp"
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
};

/// One step's batch: token rows grouped by sequence. Copied by value into every stage's message
/// (a few hundred bytes for a decode batch), so no stage reads another's state.
struct batch_layout {
  std::uint64_t step = 0;
  std::vector<std::int32_t> tokens;
  std::vector<batch_sequence> seqs;
  std::int32_t n_rows() const { return static_cast<std::int32_t>(tokens.size()); }
};

/// Activations moving down the pipeline: n_rows x hidden floats, owned by the message.
struct forward {
  batch_layout layout;
  std::vector<float> hidden;
};

/// Output stage: start or stop keeping a sampler for a sequence (penalty counts, RNG).
struct open_sampler {
  std::uint64_t id = 0;
  sampling::sampling_params settings;
  /// Tokens already in the sequence (prompt), for repetition penalties.
  std::vector<std::int32_t> history;
};
struct close_sampler {
  std::uint64_t id = 0;
};

using stage_inbox = std::variant<forward, open_sampler, close_sampler>;
using stage_address = actors::address<stage_inbox>;

/// A drawn token with what the API reports about it.
struct sampled_token {
  std::uint64_t seq = 0;
  std::int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

}  // namespace strata::pipeline
