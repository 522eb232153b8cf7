#pragma once
// sampler: one sequence's next-token choice. The chain is llama.cpp's default order:
// logit_bias and penalties -> top_k -> top_p -> min_p -> temperature -> draw. Temperature 0 is
// greedy. Logprobs are reported from the model's own distribution (the log-softmax of the raw
// logits, before bias, penalties and temperature), as OpenAI documents them.

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/error.hpp"

namespace strata::sampling {

struct sampling_params {
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;  // 0: off
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::uint64_t seed = 0;
  bool logprobs = false;
  std::int32_t top_logprobs = 0;
  std::vector<std::pair<std::int32_t, float>> logit_bias;

  /// Each out-of-range value is an error naming the parameter.
  result<void> validate() const;
};

struct choice {
  std::int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

class sampler {
 public:
  /// `history`: the prompt, for the repetition penalty.
  sampler(sampling_params p, std::vector<std::int32_t> history);

  /// Chooses the next token from logits (modified in place) and records it.
  choice draw(float* logits, std::int32_t n_vocab);

 private:
  struct candidate {
    std::int32_t id;
    float logit;
  };
  sampling_params p_;
  std::mt19937_64 rng_;
  std::unordered_map<std::int32_t, std::int32_t> prompt_counts_;
  std::unordered_map<std::int32_t, std::int32_t> generated_counts_;
  std::vector<candidate> cand_;
  std::vector<float> raw_;
  float lse_ = 0.0f;
};

}  // namespace strata::sampling
