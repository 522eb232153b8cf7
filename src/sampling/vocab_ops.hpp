#pragma once
// vocab_ops: the passes over a whole vocabulary of logits that every draw makes (the maximum,
// the argmax, the exponentials and their sum), written with independent lanes so that the
// compiler keeps several in flight (and vectorizes them) instead of one long dependency chain.

#include <cstdint>

namespace strata::sampling {

/// The largest value, NaNs skipped; -inf when there is none (n may be 0).
float max_logit(const float* logits, std::int32_t n) noexcept;

/// The index of the first largest value (NaNs skipped); 0 when every value is -inf or NaN.
std::int32_t argmax(const float* logits, std::int32_t n) noexcept;

/// Writes out[i] = std::exp((logits[i] - shift) * scale) and returns their sum in double.
double exp_and_sum(const float* logits, std::int32_t n, float shift, float scale, float* out) noexcept;

/// The sum of std::exp(logits[i] - shift), in double.
double sum_exp(const float* logits, std::int32_t n, float shift) noexcept;

}  // namespace strata::sampling
