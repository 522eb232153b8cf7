#pragma once
// The body of POST /v1/completions, parsed and validated.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"
#include "src/api/sampling_params.hpp"

namespace strata::api::schema {

/// The most prompts one completion request may give (each gets `n` choices).
inline constexpr std::size_t k_max_prompts = 64;

/// A validated text completion request. Its prompts are all text or all token ids, never both.
struct completion_request {
  std::string model;
  /// The prompts as text: `"..."` (one) or `["...", "..."]` (one choice each, in order).
  std::vector<std::string> prompt_texts;
  /// The prompts as token ids: `[1, 2, 3]` (one) or `[[1, 2], [3]]`; when non-empty, prompt_texts
  /// is empty.
  std::vector<std::vector<std::int32_t>> prompt_tokens;
  /// The prompt's text precedes each choice's.
  bool echo = false;
  /// Each choice also lists the ids of the tokens it generated (`token_ids`), as vLLM's
  /// `return_token_ids` does; not streamed.
  bool return_token_ids = false;
  sampling_params sampling;
};

/// Parses and validates a completion body. A non-empty `suffix` is refused; unknown members are
/// ignored; a member given twice keeps its last value.
api_result<completion_request> parse_completion_request(std::string_view body, const parse_limits& limits = default_limits);

}  // namespace strata::api::schema
