#pragma once
// sampling_params: one request's sampling settings, with the ranges the API accepts.

#include <cstdint>
#include <utility>
#include <vector>

#include "src/common/error.hpp"

namespace strata::sampling {

/// How one sequence picks its tokens. The defaults change nothing: plain sampling at
/// temperature 1 from the model's distribution.
struct sampling_params {
  /// Divides the logits before the draw; 0 is greedy (argmax). In [0, 2].
  float temperature = 1.0f;
  /// Nucleus: keep the most likely tokens until their probability reaches top_p. In (0, 1].
  float top_p = 1.0f;
  /// Keep only the k most likely tokens; 0 turns it off.
  std::int32_t top_k = 0;
  /// Keep tokens whose probability is at least min_p times the most likely one's. In [0, 1].
  float min_p = 0.0f;
  /// OpenAI's: logit -= presence_penalty once the token was generated. In [-2, 2].
  float presence_penalty = 0.0f;
  /// OpenAI's: logit -= frequency_penalty * (times the token was generated). In [-2, 2].
  float frequency_penalty = 0.0f;
  /// CTRL's: tokens in the penalty window have positive logits divided by it and negative ones
  /// multiplied by it. 1 is off; > 0.
  float repetition_penalty = 1.0f;
  /// The repetition penalty's window: the last n tokens of prompt and output together; -1 is the
  /// whole sequence, 0 turns the penalty off. 64 as llama.cpp.
  std::int32_t penalty_last_n = 64;
  /// Seeds the sequence's own random generator: the same seed gives the same tokens.
  std::uint64_t seed = 0;
  /// Report the chosen token's log probability.
  bool logprobs = false;
  /// Also report the N most likely tokens with theirs. In [0, 20].
  std::int32_t top_logprobs = 0;
  /// Token id -> bias added to its logit, in [-100, 100]; -100 bans the token outright.
  std::vector<std::pair<std::int32_t, float>> logit_bias;

  /// Checks every range above. The error names the parameter (the API makes it a 400). With
  /// n_vocab > 0, logit_bias token ids must also lie in [0, n_vocab).
  result<void> validate(std::int32_t n_vocab = 0) const;
};

}  // namespace strata::sampling
