#pragma once
// The body of POST /v1/messages (Anthropic's Messages API) and /v1/messages/count_tokens, parsed,
// validated and mapped onto the chat shape the templates render:
//
//   system (a string or text blocks)       -> a leading {"role":"system"} message
//   user text blocks                       -> {"role":"user","content":"..."}
//   user tool_result blocks                -> {"role":"tool","tool_call_id":ID,"content":"..."}, one each,
//                                             before the message's text
//   assistant text / tool_use / thinking   -> {"role":"assistant","content":..., "tool_calls":[...],
//                                             "reasoning_content":...}
//   tools [{name, description, input_schema}]  -> [{"type":"function","function":{name, description, parameters}}]
//   tool_choice auto / any / tool / none   -> "auto" / "required" / {"type":"function",...} / "none"
//
// Errors are api_errors like the OpenAI endpoints'; the service writes them in Anthropic's shape.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"

namespace strata::api::schema {

struct messages_request {
  std::string model;
  /// Required by the Messages API (count_tokens excepted); at least 1.
  std::int64_t max_tokens = 0;
  /// The conversation in the chat-completions shape (see above), system message first.
  boost::json::array messages;
  /// OpenAI-shaped tools and tool_choice (null when absent).
  boost::json::value tools;
  boost::json::value tool_choice;
  /// disable_parallel_tool_use inverted.
  bool parallel_tool_calls = true;
  std::vector<std::string> stop_sequences;
  bool stream = false;
  /// [0, 1] as Anthropic's; 1 by default.
  double temperature = 1.0;
  double top_p = 1.0;
  std::int64_t top_k = 0;
  /// Extension, as on chat completions: the same seed draws the same tokens.
  std::optional<std::int64_t> seed;
  /// `thinking: {type: "enabled"}`: the template may think (enable_thinking).
  bool thinking = false;
};

/// Parses a Messages body. `count_only`: the count_tokens endpoint, which takes no max_tokens.
api_result<messages_request> parse_messages_request(std::string_view body, bool count_only = false,
                                                    const parse_limits& limits = default_limits);

/// Anthropic's error type for an HTTP status: invalid_request_error, authentication_error,
/// permission_error, not_found_error, request_too_large, rate_limit_error, api_error,
/// overloaded_error.
std::string_view anthropic_error_type(int status);

/// `{"type":"error","error":{"type":...,"message":...}}`.
std::string write_anthropic_error(const api_error& e);

}  // namespace strata::api::schema
