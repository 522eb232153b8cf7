#pragma once
// The forward pass, one layer at a time, so that each layer can run in its own actor:
//   embed -> layer_forward(0) -> ... -> layer_forward(n-1) -> output_logits.
// A batch holds rows (tokens) of several sequences; each row attends to its own sequence's KV up
// to its position (through the sliding window on layers that have one). Batched decode (many
// sequences, one row each) is one matmul per weight with m = the number of rows.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/compute_pool.hpp"
#include "src/model/hparams.hpp"
#include "src/model/layer_kv.hpp"
#include "src/model/model.hpp"
#include "src/model/recurrent_state.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

/// One sequence's rows in a batch: rows [first_row, first_row + n_rows) are its positions
/// start_pos, start_pos + 1, ... (a sequence's rows are contiguous and in position order); its KV
/// pages are blocks[0 .. n_blocks), page i holding positions [i * page_tokens, (i+1) * page_tokens).
/// In models with recurrent layers, state_slot is its slot in the recurrent_state, which must hold
/// its state after position start_pos - 1.
struct seq_rows {
  const std::int32_t* blocks = nullptr;
  std::int32_t n_blocks = 0;
  std::int32_t first_row = 0;
  std::int32_t n_rows = 0;
  std::int32_t start_pos = 0;
  std::int32_t state_slot = 0;
};

/// The rows of one forward step; seqs cover rows [0, n_rows) in order.
struct batch_view {
  const std::int32_t* tokens = nullptr;
  std::int32_t n_rows = 0;
  std::span<const seq_rows> seqs;
};

/// The activations of one step, allocated once for batches of up to max_rows rows and reused by
/// every layer and every step. Larger batches still work: layer_forward runs them in slices.
class scratch {
 public:
  scratch(const hparams& h, std::int32_t max_rows);
  std::int32_t max_rows() const { return max_rows_; }
  /// Whether this scratch was sized for the dimensions of h.
  bool fits(const hparams& h) const;

 private:
  friend struct forward_access;
  std::int32_t max_rows_;
  std::int64_t n_embd_, q_dim_, kv_dim_, n_ff_;
  std::vector<float> cur_, q_, k_, v_, attn_, out_, gate_, up_;
  std::vector<seq_rows> slice_;
};

/// hidden (n x n_embd) = the embeddings of tokens (scaled as the architecture says). Token ids
/// must lie in [0, n_vocab).
void embed(const model_weights& w, const hparams& h, const std::int32_t* tokens, std::int32_t n, float* hidden);

/// Runs layer il over the batch: hidden (n_rows x n_embd) is transformed in place, and the
/// layer's K and V for the batch's positions are written into kv first (so a row also sees the
/// earlier rows of its own sequence in the same batch). A recurrent layer (hparams::recurrent)
/// reads and updates its sequences' slots in `state` instead (std::invalid_argument without one).
void layer_forward(const layer_weights& w, const hparams& h, int il, const batch_view& batch, float* hidden,
                   layer_kv& kv, scratch& s, kernels::compute_pool& pool, recurrent_state* state = nullptr);

/// Logits (rows.size() x n_vocab) of the hidden rows listed in rows: final norm, LM head, the
/// final soft-cap. rows.size() may exceed s.max_rows() (it is done in slices).
void output_logits(const model_weights& w, const hparams& h, const float* hidden, std::span<const std::int32_t> rows,
                   float* logits, scratch& s, kernels::compute_pool& pool);

/// Sets part to the runs of batch's sequences that fall in rows [r0, r1), their rows counted from
/// r0 (the batch_view of rows [r0, r1) uses it as its seqs).
void slice_rows(const batch_view& batch, std::int32_t r0, std::int32_t r1, std::vector<seq_rows>& part);

/// The same three steps on a loaded model, with a per-thread scratch that grows to the largest
/// batch seen (for callers that keep no scratch of their own).
void embed(const model& m, const std::int32_t* tokens, std::int32_t n, float* hidden);
void layer_forward(const model& m, int il, const batch_view& batch, float* hidden, layer_kv& kv,
                   kernels::compute_pool& pool, recurrent_state* state = nullptr);
void output_logits(const model& m, const float* hidden, std::span<const std::int32_t> rows, float* logits,
                   kernels::compute_pool& pool);

}  // namespace strata::model
