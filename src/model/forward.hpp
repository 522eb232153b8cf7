#pragma once
// The forward pass, one layer at a time, so that each layer can run in its own actor:
//   embed -> layer_forward(0) -> ... -> layer_forward(n-1) -> output_logits.
// A batch holds rows (tokens) of several sequences; each row attends to its own sequence's KV up
// to its position (through the sliding window on layers that have one).

#include <cstdint>
#include <span>

#include "kernels/compute_pool.hpp"
#include "src/model/layer_kv.hpp"
#include "src/model/model.hpp"

namespace strata::model {

/// One sequence's rows in a batch: rows [first_row, first_row + n_rows) are positions
/// start_pos, start_pos + 1, ...; its KV pages are blocks[0 .. n_blocks).
struct seq_rows {
  const std::int32_t* blocks = nullptr;
  std::int32_t n_blocks = 0;
  std::int32_t first_row = 0;
  std::int32_t n_rows = 0;
  std::int32_t start_pos = 0;
};

struct batch_view {
  const std::int32_t* tokens = nullptr;
  std::int32_t n_rows = 0;
  std::span<const seq_rows> seqs;
};

/// hidden (n x n_embd) = the embeddings of tokens (scaled as the architecture says).
void embed(const model& m, const std::int32_t* tokens, std::int32_t n, float* hidden);

/// Runs layer il over the batch: hidden (n_rows x n_embd) is transformed in place, and the
/// layer's K and V for the batch's positions are written into kv.
void layer_forward(const model& m, int il, const batch_view& batch, float* hidden, layer_kv& kv,
                   kernels::compute_pool& pool);

/// Logits (n_out x n_vocab) of the hidden rows listed in rows: final norm, LM head, soft-cap.
void output_logits(const model& m, const float* hidden, std::span<const std::int32_t> rows, float* logits,
                   kernels::compute_pool& pool);

}  // namespace strata::model
