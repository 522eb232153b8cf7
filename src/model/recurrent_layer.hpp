#pragma once
// qwen35's layers: the Gated DeltaNet mixer of its recurrent layers, and the output gate of its
// attention layers (forward.cpp runs the rest: norms, attention over KV pages, the FFN).
//
// A recurrent layer, for the normed input x of each row (llama.cpp's qwen35 graph):
//   qkv = W_qkv x, z = W_gate x, beta = sigmoid(W_beta x), g = softplus(W_alpha x + dt) * a
//   q, k, v = silu(causal_conv(qkv)) split; q and k scaled to unit length per head
//   o = gated delta rule (kernels/delta_rule.hpp), value head h reading query/key head h % k_heads
//   out = W_out (rms_norm(o) per head * ssm_norm * silu(z))
// Each sequence continues from its slot's convolution rows and delta state, and leaves them
// updated. A sequence's rows in one step go through the chunked rule, a single row (decode)
// through the recurrence.

#include <cstdint>

#include "kernels/compute_pool.hpp"
#include "src/model/forward.hpp"
#include "src/model/hparams.hpp"
#include "src/model/recurrent_state.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

/// Layer il's mixer over the batch: cur (n_rows x n_embd, the normed input) gives out (n_rows x
/// n_embd, before the residual). Reads and updates the states of the batch's slots in layer il.
void recurrent_mixer(const layer_weights& w, const hparams& h, int il, const batch_view& batch, const float* cur, float* out,
                     recurrent_state& state, kernels::compute_pool& pool);

/// The short causal convolution of a recurrent layer (qwen35's or Mamba-2's) over the batch,
/// each sequence continuing from its slot's rows in layer il, split over channel ranges: row i of
/// x (x_stride apart) gives row i of out (ssm_conv_dim() values each). Every slot is checked
/// first (std::out_of_range); taps is workspace of ssm_conv_dim() x ssm_conv_kernel floats.
void conv_sequences(const tensor_view& conv1d, const hparams& h, int il, const batch_view& batch, const float* x, std::int64_t x_stride,
                    float* taps, float* out, recurrent_state& state, kernels::compute_pool& pool);

/// Gated attention: qg holds n rows of n_head (query, gate) pairs of head_dim values each (what
/// wq gives). Writes the queries to q (n x q_dim) and moves the gates to qg's first n x q_dim values.
void split_query_gate(float* qg, float* q, std::int64_t n, const hparams& h);

/// attn[i] *= sigmoid(gate[i]) for i < n.
void apply_output_gate(float* attn, const float* gate, std::int64_t n);

}  // namespace strata::model
