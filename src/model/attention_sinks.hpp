#pragma once
// Attention sinks (gpt-oss): each query head has a learned logit that every row's softmax counts
// in its denominator without adding a value, so a head can attend to "nothing". Applied after the
// attention kernels from the log-sum-exp of each row's scores, which they give.

#include <cstdint>

#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model {

/// Rows [r0, r1) of attn (n_head x head_dim each): head h is scaled by e^lse / (e^lse + e^sink),
/// that is 1 / (1 + e^(sink_h - lse_h)), lse the row's log-sum-exp per head (n_head per row).
void apply_attention_sinks(const tensor_view& sinks, const hparams& h, const float* lse, float* attn, std::int64_t r0, std::int64_t r1);

}  // namespace strata::model
