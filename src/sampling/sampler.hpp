#pragma once
// sampler: one sequence's next-token choice, with the state that persists between tokens
// (penalty counts, the random generator) and reusable buffers, so that a draw allocates nothing
// (except the top_logprobs list when one is asked for).
//
// The chain is llama.cpp's default order:
//
//   logit_bias -> repetition penalty -> presence/frequency penalties
//     -> top_k -> top_p -> min_p -> temperature -> draw
//
// top_p and min_p see the probabilities at temperature 1 of what the previous steps kept
// (renormalized), as llama.cpp applies the temperature last. Temperature 0 is greedy: the argmax
// after bias and penalties, whatever the truncation settings.
//
// Logprobs are those of the model's own distribution: the log-softmax of the raw logits, before
// bias, penalties, truncation and temperature (vLLM's default, and what lets a client compare
// logprobs across sampling settings). The chosen token's logprob and the top_logprobs list come
// from that same distribution, so the chosen token may rank below the listed ones.

#include <array>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "src/sampling/sampling_params.hpp"
#include "src/sampling/token_counts.hpp"

namespace strata::sampling {

/// One drawn token.
struct choice {
  std::int32_t token = -1;
  /// log p(token) under the raw logits; set when logprobs or top_logprobs is asked for.
  float logprob = 0.0f;
  /// The top_logprobs most likely tokens under the raw logits, most likely first.
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

class sampler {
 public:
  /// `p` must have passed validate(). `history`: the prompt, which counts for the repetition
  /// penalty (presence and frequency penalties count generated tokens only, as OpenAI's).
  sampler(sampling_params p, const std::vector<std::int32_t>& history);

  /// Chooses the next token from n_vocab logits, which it modifies in place (bias and
  /// penalties), and records it. When every token is banned the choice among them is arbitrary.
  choice draw(float* logits, std::int32_t n_vocab);

  /// Records a token that joined the sequence without a draw (draw() records its own).
  void accept(std::int32_t token);

  const sampling_params& params() const noexcept { return p_; }

 private:
  struct candidate {
    std::int32_t id;
    float logit;
  };

  void apply_bias_and_penalties(float* logits, std::int32_t n, bool keep_raw);
  void remember_raw(std::int32_t token, float raw);
  std::int32_t sample(const float* logits, std::int32_t n);
  void select_top_k(const float* logits, std::int32_t n, std::size_t k);
  std::size_t select_nucleus(const float* logits, std::int32_t n);
  std::size_t cut_nucleus(std::size_t keep);
  std::size_t cut_min_p(std::size_t keep);
  std::int32_t draw_candidates(std::size_t keep);
  double uniform() noexcept;

  sampling_params p_;
  std::mt19937_64 rng_;
  bool repetition_on_ = false;
  bool presence_on_ = false;
  std::vector<std::int32_t> window_;  // the last penalty_last_n tokens, a ring (unused for -1)
  std::size_t window_next_ = 0;
  token_counts window_counts_;     // counts over window_ (or the whole sequence)
  token_counts generated_counts_;  // counts over generated tokens
  std::vector<candidate> cand_;
  std::vector<float> weights_;
  static constexpr std::size_t nucleus_bins = 2048;
  std::array<double, nucleus_bins> bin_mass_{};
  std::vector<std::pair<std::int32_t, float>> raw_;  // logits before bias and penalties
};

}  // namespace strata::sampling
