#pragma once
// How a layer's rows are prepared for q4_0 KV pages, and its attention output turned back, so
// that 4 bits per value lose as little as they can (kernels/kv_quant.hpp has the maps):
//
//   keys:    k * s (smoothing), then each 32-value block rotated (kernels::rotate_pieces, 32)
//   queries: q / s, then rotated the same way: every q.k is unchanged
//   values:  each head rotated as a whole (kernels::rotation_width); the attention output, a
//            weighted sum of rotated values, is turned back by the inverse
//   then K and V quantized with fitted block scales (kernels::quantize_q4_0_fitted).
//
// Smoothing: with Q/K norms (gemma3, qwen3) the norm weights say which channels of the queries
// and of the keys are large; a key's 4-bit error then costs q.k most where the query is large
// and the key small. Scaling key channel i by s_i = sqrt(|q gain_i| / |k gain_i|) and the query
// by 1 / s_i keeps q.k and evens the two out (the product of their error and weight is least when
// both profiles are alike). Each RoPE pair gets one factor (the rotation mixes its two channels).
// Without the norms, s = 1.
//
// Keys rotate per 32-value block, not over the whole head: each block then keeps its own scale
// for its band of RoPE frequencies, whose sizes differ by far (on SmolLM2 and Gemma 3 the
// whole-head rotation of keys cost 2-4% more perplexity). Values have no such bands, and a
// rotation over the whole head spreads their outliers furthest.
//
// Changing any of this changes what stored q4_0 pages mean: kv::k_q4_layout_revision must move.

#include <cstdint>

#include "kernels/attention.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

/// The keys' smoothing factors of one layer (head_dim values, the same for every kv head), into
/// s; false (and s untouched) when the layer has no Q/K norms to take them from.
bool q4_key_smoothing(const layer_weights& w, const hparams& h, float (&s)[kernels::k_attention_max_head_dim]);

/// In place, one row's query (q_dim), key and value (kv_dim) as q4_0 pages take them; smooth is
/// q4_key_smoothing's factors or null.
void prepare_q4_row(const hparams& h, const float* smooth, float* q, float* k, float* v);

/// In place, rows of attention output (q_dim each) over q4_0 pages back to true values.
void finish_q4_rows(const hparams& h, float* attn, std::int64_t n_rows);

/// One row's key and value (kv_dim each) into its q4_0 slots.
void quantize_q4_row(const float* k, const float* v, std::int64_t kv_dim, void* k_slot, void* v_slot);

}  // namespace strata::model
