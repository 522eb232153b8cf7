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
//
// Measured and not kept yet (strata perplexity on GPL-3, 14 chunks of 512, one build; f16 KV gave
// SmolLM2 18.380 and Gemma 3 13.908, q4_0 as above 19.347 (+5.3%) and 14.387 (+3.4%)):
// - Key centering. Softmax is shift-invariant, so a fixed vector m taken from every key of a layer
//   (after RoPE, smoothing and rotation) leaves attention exact, as long as nothing reads the raw
//   scores (a softcap does; attention sinks' log-sum-exp would move by q.m). With m the mean of
//   such keys over 1024 tokens of Apache-2.0: SmolLM2 18.850 (+2.6%), Gemma 3 14.298 (+2.8%);
//   with STRATA_ISA=avx2, q4_0 19.480 (+6.0%) -> 18.901 (+2.8%, m from 256 tokens of MPL-2.0)
//   and 14.399 (+3.5%) -> 14.219 (+2.2%). On SmolLM2 256 tokens of MPL-2.0 did as well as the
//   1024 (18.849), 128 tokens gave 18.994; that m rounded to steps of 1/8 of its RMS 18.912, of
//   1/2 18.990; random token ids as the text 19.192 (it needs real text). Centering layer 0 alone gave 19.585, layers 1 on 18.997: the mean comes
//   from the residual stream, and no m taken from the weights alone was found. To keep it: a pass
//   at load over a fixed built-in text (the model's tokenizer) storing m per layer, m's digest in
//   the q4_0 cache namespace (its float sums differ by ISA, so another machine's m may differ and
//   its pages must then never match), and the layout revision moved.
// - Values centered the same way (m_v added back to the attention output before the inverse
//   rotation: exact while the weights sum to 1): keys and values 19.017 / 14.237, values alone
//   19.219 / 14.491. m = the key of BOS at position 0 instead of the mean: 19.340 / 14.299.
// - Smoothing without Q/K norms from the weights (s from the row norms of W_q diag(g) against
//   W_k diag(g), g the attn_norm gains, per RoPE pair), SmolLM2, first 6 chunks: 18.79 to 19.53
//   for exponents 0.05 to 0.35 against 18.995 without: noise, not a gain.
// q4_0 figures move by a percent or two with the rounding of float sums alone (README).

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
