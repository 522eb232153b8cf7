#pragma once
// The body of POST /v1/completions, parsed and validated.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"
#include "src/api/sampling_params.hpp"

namespace strata::api::schema {

/// A validated text completion request. The prompt is either text or token ids, never both.
struct completion_request {
  std::string model;
  /// The prompt as text: `"..."` or `["..."]`.
  std::string prompt_text;
  /// The prompt as token ids: `[1, 2, 3]`; when non-empty, prompt_text is unused.
  std::vector<std::int32_t> prompt_tokens;
  sampling_params sampling;
};

/// Parses and validates a completion body. `echo: true`, a non-empty `suffix` and prompts of
/// several strings are refused; unknown members are ignored; a member given twice keeps its last value.
api_result<completion_request> parse_completion_request(std::string_view body, const parse_limits& limits = default_limits);

}  // namespace strata::api::schema
