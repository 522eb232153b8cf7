#pragma once
// A generating request (/v1/chat/completions or /v1/completions) as the completions service
// submits it: parsed and validated by the schema parsers (simdjson on-demand), then mapped onto
// the scheduler's generation settings.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"
#include "src/chat/tool_parser.hpp"
#include "src/sampling/generation_settings.hpp"

namespace strata::api {

using schema::api_error;
using schema::invalid_request;

struct generation_request {
  bool chat = true;
  /// The body's `model`; empty when not given.
  std::string model;
  bool stream = false;
  bool include_usage = false;
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  /// The client's limit; empty means up to the context.
  std::optional<std::int64_t> max_tokens;
  /// The key the client gave it under ("max_tokens" or "max_completion_tokens").
  std::string max_tokens_key = "max_tokens";
  int kv_bits = 0;  // 4, 8, 16, or 0: the server's kv.default_bits
  std::string cache_salt;  // the body's; empty when not given
  sampling::generation_settings settings;
  /// The member settings.grammar came from ("response_format", "grammar", "json_schema"), named
  /// when it does not compile; "" when the request has none.
  std::string grammar_field;
  boost::json::array messages;  // chat: as the template sees them
  boost::json::value tools;     // chat: null when absent
  boost::json::value tool_choice;  // chat: null when absent
  bool parallel_tool_calls = true;
  boost::json::object template_kwargs;  // chat: chat_template_kwargs and reasoning_effort
  std::string chat_template;  // chat: the request's own template; empty: the model's
  std::optional<bool> add_generation_prompt;   // chat: as given (chat_request.hpp)
  std::optional<bool> continue_final_message;  // chat: as given
  /// Chat: how the sinks read the output into content, reasoning and tool calls (set when the
  /// prompt is rendered); empty: all of it is content.
  std::optional<chat::parser_options> output;
  std::vector<std::string> prompt_texts;  // completions given as text, one per prompt
  /// The first prompt's tokens: completions given as ids, else tokenized when prepared.
  std::vector<std::int32_t> prompt_tokens;
  /// Completions: the further prompts' tokens (given as ids, or tokenized), each with n choices.
  std::vector<std::vector<std::int32_t>> more_prompts;
  /// Completions: each prompt's text precedes its choices' (`echo`).
  bool echo = false;
  /// Completions: each choice lists its generated token ids (`return_token_ids`).
  bool token_ids = false;
};

/// A seed for a request that gave none: every unseeded request draws differently.
std::uint64_t fresh_seed();

/// Parses and validates a body of the chat (`chat` true) or the completions endpoint.
std::optional<api_error> parse_generation_request(std::string_view body, bool chat, generation_request& out);

}  // namespace strata::api
