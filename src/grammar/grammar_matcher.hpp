#pragma once
// grammar_matcher: one sequence's place in its compiled grammar. Before each draw it masks the
// logits of every token the grammar does not allow next (to -inf, so greedy and every sampling
// setting keep to it); after the draw it accepts the token. Once the grammar is complete only
// the end-of-generation tokens are allowed, and once one of them is drawn it has terminated.
// Not thread-safe: a sequence's sampler owns it.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace strata::grammar {

class compiled_grammar;

class grammar_matcher {
 public:
  explicit grammar_matcher(std::shared_ptr<const compiled_grammar> g);
  ~grammar_matcher();
  grammar_matcher(grammar_matcher&&) noexcept;
  grammar_matcher& operator=(grammar_matcher&&) noexcept;

  /// 32-bit words of a mask over the grammar's vocabulary (bit i of word i / 32: token i).
  std::int32_t mask_words() const noexcept;
  /// Fills `mask` (mask_words() words) with the tokens allowed next.
  void fill_mask(std::span<std::uint32_t> mask);
  /// Sets the logits of the tokens not allowed next to -inf (ids past the grammar's vocabulary
  /// too).
  void mask_logits(float* logits, std::int32_t n_logits);
  /// Moves past `token`; false when the grammar does not allow it (the state is then unchanged).
  bool accept(std::int32_t token);
  /// Whether an end-of-generation token was accepted: the output is complete.
  bool terminated() const;
  /// Whether the output so far is a complete match (an end-of-generation token may come next).
  bool completed() const;
  /// The end-of-generation tokens (never empty for a real model's vocabulary).
  const std::vector<std::int32_t>& stop_tokens() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace strata::grammar
