#pragma once
// How a layer's rows are prepared for q4_0 KV pages, and its attention output turned back, so
// that 4 bits per value lose as little as they can (kernels/kv_quant.hpp has the maps):
//
//   keys:    k * s (smoothing), then each 32-value block rotated (kernels::rotate_pieces, 32),
//            then the layer's mean key m taken away (centering)
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
// Centering: softmax is shift-invariant, so taking one fixed vector m from every key of a layer
// leaves attention exact (q.(k - m) = q.k - q.m, the same for every position one query reads), as
// long as nothing reads the raw scores: a logit softcap does, and attention sinks' log-sum-exp
// would move by q.m, so those layers keep m = 0. Keys share a large common part that comes from
// the residual stream; without it their 4-bit blocks spend their range on what is left. m is the
// mean key of each layer (after smoothing and rotation) over a fixed built-in English text run
// with f16 KV (q4_calibration_text, calibrate_q4_keys), rounded to a power-of-two step between
// 1/16 and 1/8 of its RMS. Its float sums differ by ISA, so its digest goes into the q4_0 cache
// namespace (kv::cache_namespace::q4_keys).
//
// Changing any of this changes what stored q4_0 pages mean: kv::k_q4_layout_revision must move.
//
// Measured (strata perplexity on GPL-3, 14 chunks of 512, one build; f16 KV gave
// SmolLM2 18.380 and Gemma 3 13.908, q4_0 as above 19.347 (+5.3%) and 14.387 (+3.4%)):
// - Key centering (kept, see above), while it was being tried: with m the mean of
//   such keys over 1024 tokens of Apache-2.0: SmolLM2 18.850 (+2.6%), Gemma 3 14.298 (+2.8%);
//   with STRATA_ISA=avx2, q4_0 19.480 (+6.0%) -> 18.901 (+2.8%, m from 256 tokens of MPL-2.0)
//   and 14.399 (+3.5%) -> 14.219 (+2.2%). On SmolLM2 256 tokens of MPL-2.0 did as well as the
//   1024 (18.849), 128 tokens gave 18.994; that m rounded to steps of 1/8 of its RMS 18.912, of
//   1/2 18.990; random token ids as the text 19.192 (it needs real text). Centering layer 0 alone gave 19.585, layers 1 on 18.997: the mean comes
//   from the residual stream, and no m taken from the weights alone was found. As kept (the
//   built-in prose, position 0 left out, power-of-two steps): SmolLM2 19.046 (+3.6%), Gemma 3
//   14.252 (+2.5%); with position 0 in the mean 19.188 / 14.231. m from license text did better
//   on SmolLM2 above (perhaps because the test text is itself a license).
// - Values centered the same way (m_v added back to the attention output before the inverse
//   rotation: exact while the weights sum to 1): keys and values 19.017 / 14.237, values alone
//   19.219 / 14.491. m = the key of BOS at position 0 instead of the mean: 19.340 / 14.299.
// - Smoothing without Q/K norms from the weights (s from the row norms of W_q diag(g) against
//   W_k diag(g), g the attn_norm gains, per RoPE pair), SmolLM2, first 6 chunks: 18.79 to 19.53
//   for exponents 0.05 to 0.35 against 18.995 without: noise, not a gain.
// q4_0 figures move by a percent or two with the rounding of float sums alone (README).

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/compute_pool.hpp"
#include "src/common/error.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model { struct model; }

namespace strata::model {

/// The keys' smoothing factors of one layer (head_dim values, the same for every kv head), into
/// s; false (and s untouched) when the layer has no Q/K norms to take them from.
bool q4_key_smoothing(const layer_weights& w, const hparams& h, float (&s)[kernels::k_attention_max_head_dim]);

/// In place, one row's query (q_dim), key and value (kv_dim) as q4_0 pages take them; smooth is
/// q4_key_smoothing's factors or null, key_mean the layer's m (kv_dim values, q4_key_means) or null.
void prepare_q4_row(const hparams& h, const float* smooth, const float* key_mean, float* q, float* k, float* v);

/// Whether layer il's keys may be centered: false where the raw scores are read (a logit softcap,
/// attention sinks) or the layer has no KV pages (recurrent).
bool q4_centering_applies(const layer_weights& w, const hparams& h, int il);

/// Every layer's mean key for q4_0 pages: n_layer rows of kv_dim values (zero where the layer is
/// not centered), in the space prepare_q4_row leaves keys in.
struct q4_key_means {
  std::int32_t kv_dim = 0;
  std::vector<float> m;
  /// Layer il's m, or null when it is all zero (nothing to take away).
  const float* layer(int il) const;
};

/// The built-in English prose that the mean keys are taken over (plain text, about 300 tokens).
std::string_view q4_calibration_text();

/// Runs `tokens` (q4_calibration_text as the model's tokenizer encodes it, BOS first when the
/// model adds one) through the model with f16 KV and returns each layer's mean key, rounded to
/// a power-of-two step of 1/16 to 1/8 of its RMS (so that the rounding of float sums rarely moves
/// it). Fails on an
/// empty or out-of-vocabulary token list.
result<q4_key_means> calibrate_q4_keys(std::shared_ptr<const model> m, kernels::compute_pool& pool,
                                       std::span<const std::int32_t> tokens);

/// In place, rows of attention output (q_dim each) over q4_0 pages back to true values.
void finish_q4_rows(const hparams& h, float* attn, std::int64_t n_rows);

/// One row's key and value (kv_dim each) into its q4_0 slots.
void quantize_q4_row(const float* k, const float* v, std::int64_t kv_dim, void* k_slot, void* v_slot);

}  // namespace strata::model
