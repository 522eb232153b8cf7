#pragma once
// The mixture-of-experts feed-forward block (qwen3moe, gpt-oss): a router scores every expert for
// each token, the best n_expert_used are kept with softmax weights, and the token's output is the
// weighted sum of those experts' SwiGLU FFNs. The batch's rows are grouped by expert so that each
// selected expert's matrices are read once per batch (kernels::matmul_grouped).

#include <cstdint>

#include "kernels/compute_pool.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

/// One token's routing: from the router's n_expert logits (biases added), the n_expert_used
/// experts chosen, best first, and their weights (summing to 1).
void route(const hparams& h, const float* logits, std::int32_t* experts, float* weights);

/// out (n x n_embd) = the mixture of experts of cur (n x n_embd, the normed rows).
void moe_ffn(const layer_weights& w, const hparams& h, const float* cur, std::int64_t n, float* out, kernels::compute_pool& pool);

/// The same, one token and one expert at a time on this thread: every matrix row dequantized and
/// dotted in double (the reference moe_ffn is tested against). With round_activations, each
/// activation row is first rounded to 8 bits as the kernels of the weight's type round it
/// (kernels::act_format_for), so that only the order of the sums separates the two.
void moe_ffn_reference(const layer_weights& w, const hparams& h, const float* cur, std::int64_t n, float* out,
                       bool round_activations = false);

}  // namespace strata::model
