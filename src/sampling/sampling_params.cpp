#include "src/sampling/sampling_params.hpp"

namespace strata::sampling {
namespace {

bool within(float x, float lo, float hi) { return x >= lo && x <= hi; }  // false for NaN

}  // namespace

result<void> sampling_params::validate(std::int32_t n_vocab) const {
  if (!within(temperature, 0.0f, 2.0f)) return fail(errc::invalid_argument, "temperature must be in [0, 2], got ", temperature);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return fail(errc::invalid_argument, "top_p must be in (0, 1], got ", top_p);
  if (top_k < 0) return fail(errc::invalid_argument, "top_k must be >= 0 (0 turns it off), got ", top_k);
  if (!within(min_p, 0.0f, 1.0f)) return fail(errc::invalid_argument, "min_p must be in [0, 1], got ", min_p);
  if (!within(presence_penalty, -2.0f, 2.0f)) return fail(errc::invalid_argument, "presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (!within(frequency_penalty, -2.0f, 2.0f)) return fail(errc::invalid_argument, "frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  if (!(repetition_penalty > 0.0f && repetition_penalty < 1e30f)) return fail(errc::invalid_argument, "repetition_penalty must be > 0, got ", repetition_penalty);
  if (penalty_last_n < -1) return fail(errc::invalid_argument, "penalty_last_n must be >= -1, got ", penalty_last_n);
  if (top_logprobs < 0 || top_logprobs > 20) return fail(errc::invalid_argument, "top_logprobs must be in [0, 20], got ", top_logprobs);
  for (const auto& [token, bias] : logit_bias) {
    if (!within(bias, -100.0f, 100.0f)) return fail(errc::invalid_argument, "logit_bias values must be in [-100, 100], got ", bias, " for token ", token);
    if (token < 0 || (n_vocab > 0 && token >= n_vocab))
      return fail(errc::invalid_argument, "logit_bias token ", token, " is not in the vocabulary");
  }
  return {};
}

}  // namespace strata::sampling
