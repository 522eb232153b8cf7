#pragma once
// The sampling and generation parameters shared by /v1/chat/completions and /v1/completions.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/sampling/grammar_spec.hpp"
#include "src/sampling/sampling_params.hpp"

namespace strata::api::schema {

/// Which endpoint's schema a body follows; a few parameters differ between the two.
enum class endpoint { chat, completions };

/// Parameters common to both generating endpoints, validated and with OpenAI's defaults filled
/// in. Extensions beyond OpenAI's API are marked.
struct sampling_params {
  /// Send the answer as a stream of chunks (SSE or WebSocket frames).
  bool stream = false;
  /// `stream_options.include_usage`: a final chunk with usage; meaningful only when streaming.
  bool include_usage = false;
  /// The completion-token limit. `max_completion_tokens` (chat's newer name) takes precedence over
  /// `max_tokens` whenever both are given, whatever their order in the body. Empty: up to the context.
  std::optional<std::int64_t> max_tokens;
  /// The key max_tokens came from, to name it in an error: "max_tokens" or "max_completion_tokens".
  const char* max_tokens_key = "max_tokens";
  /// The sampler's own settings (src/sampling/sampling_params.hpp), read with the API's ranges:
  /// temperature [0, 2] (0 is greedy), top_p (0, 1], top_k (extension; 0 disables), min_p
  /// (extension) [0, 1], presence_penalty and frequency_penalty [-2, 2], repetition_penalty
  /// (extension) > 0, logprobs and top_logprobs (chat's `logprobs: true` and `top_logprobs` [0, 20],
  /// or completions' `logprobs` [0, 5]), logit_bias (ids with biases in [-100, 100], in the order
  /// given, a repeated id keeping its last bias). Its seed is set when the request is submitted.
  sampling::sampling_params sampler;
  /// Any int64; empty draws from the server's entropy.
  std::optional<std::int64_t> seed;
  /// Up to 4 non-empty stop strings.
  std::vector<std::string> stop;
  /// Choices per request, [1, 16].
  int n = 1;
  /// Extension: keep generating past the end-of-sequence token.
  bool ignore_eos = false;
  /// Extension: KV cache precision of this request, 4, 8 or 16; 0 when not given (the server's
  /// kv.default_bits).
  int kv_bits = 0;
  /// Extension (as vLLM's): a non-empty string whose requests share prefix-cache blocks only with
  /// each other; empty when not given.
  std::string cache_salt;
  /// Accepted for compatibility (chat); tool calls are produced one at a time or in parallel as
  /// the model writes them.
  bool parallel_tool_calls = true;
  /// What the output must match: `response_format` json_object / json_schema, or llama.cpp's
  /// `grammar` (GBNF) or `json_schema` (extensions); none by default.
  sampling::grammar_spec grammar;
  /// The member the grammar came from, to name it when it does not compile: "response_format",
  /// "grammar" or "json_schema".
  std::string grammar_field;
};

}  // namespace strata::api::schema
