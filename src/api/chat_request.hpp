#pragma once
// The body of POST /v1/chat/completions, parsed and validated.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"
#include "src/api/sampling_params.hpp"

namespace strata::api::schema {

/// One chat message. Content given as an array of `{"type":"text","text":...}` parts is joined
/// with "\n" between parts; other part types (images, audio) are refused.
struct chat_message {
  /// system, user, assistant, tool or developer.
  std::string role;
  std::string content;
  /// True when content was null or absent (allowed for assistant messages only).
  bool content_null = false;
  std::string name;
  /// Tool messages: the id of the call they answer.
  std::string tool_call_id;
  /// Assistant messages: the calls as given (`[{id, type:"function", function:{name, arguments}}]`).
  boost::json::array tool_calls;
};

/// A validated chat completion request.
struct chat_request {
  /// Any string; the server decides what it maps to.
  std::string model;
  std::vector<chat_message> messages;
  /// The same messages as JSON for the chat template: each message object as given, except that
  /// array content is replaced by the joined string and absent content by null.
  boost::json::array messages_json;
  /// `tools` and `tool_choice` as given (null when absent), checked (tool_fields.hpp), for the template.
  boost::json::value tools;
  boost::json::value tool_choice;
  /// Variables for the chat template: `chat_template_kwargs` (an object; e.g. enable_thinking),
  /// and `reasoning_effort` when given, under that name.
  boost::json::object template_kwargs;
  /// Extension (as vLLM's): a Jinja chat template for this request instead of the model's; empty
  /// when not given.
  std::string chat_template;
  /// Extensions (as vLLM's): whether the prompt ends with the assistant's generation prompt, and
  /// whether the last (assistant) message is continued; empty when not given (a last assistant
  /// message with content is continued, any other conversation gets the generation prompt).
  std::optional<bool> add_generation_prompt;
  std::optional<bool> continue_final_message;
  sampling_params sampling;
};

/// Parses and validates a chat completion body. Unknown members are ignored (after a check that
/// they are well-formed JSON); a member given twice keeps its last value.
api_result<chat_request> parse_chat_request(std::string_view body, const parse_limits& limits = default_limits);

}  // namespace strata::api::schema
