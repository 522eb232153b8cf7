#pragma once
// The body of POST /v1/responses (OpenAI's Responses API), parsed, validated and mapped onto the
// chat shape the templates render:
//
//   instructions                          -> a leading {"role":"system"} message
//   input "text"                          -> {"role":"user","content":"text"}
//   message items (input_text/output_text parts)  -> {"role":ROLE,"content":"..."}
//   function_call items                   -> an assistant message's tool_calls (consecutive calls join one)
//   function_call_output items            -> {"role":"tool","tool_call_id":CALL_ID,"content":OUTPUT}
//   reasoning items                       -> accepted, not rendered (templates drop past reasoning)
//   tools [{type:"function",name,...}]    -> [{"type":"function","function":{name,description,parameters,strict}}]
//   tool_choice {type:"function",name}    -> {"type":"function","function":{"name":...}}
//   text.format json_schema / json_object -> the request's grammar_spec
//   reasoning.effort                      -> the template's reasoning_effort
//
// The echo members keep what the client sent, for the response object, which repeats them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"
#include "src/sampling/grammar_spec.hpp"

namespace strata::api::schema {

struct responses_request {
  std::string model;
  /// Instructions (as a system message) then the input items, in the chat shape. With
  /// previous_response_id the stored conversation goes between the two (the service adds it).
  boost::json::array instructions;
  boost::json::array input;
  /// Chat-shaped tools and tool_choice (null when absent).
  boost::json::value tools;
  boost::json::value tool_choice;
  bool parallel_tool_calls = true;
  std::optional<std::int64_t> max_output_tokens;
  double temperature = 1.0;
  double top_p = 1.0;
  /// Extension, as on chat completions: the same seed draws the same tokens.
  std::optional<std::int64_t> seed;
  bool stream = false;
  /// Keep the response for GET /v1/responses/{id} and previous_response_id (OpenAI's default).
  bool store = true;
  std::string previous_response_id;
  sampling::grammar_spec grammar;
  std::string reasoning_effort;

  /// As given, for the response object: instructions (string or null), tools (the Responses
  /// shape, [] when absent), tool_choice ("auto" when absent), text ({"format":{"type":"text"}}
  /// when absent), metadata (null when absent), reasoning (null when absent).
  boost::json::value echo_instructions;
  boost::json::value echo_tools;
  boost::json::value echo_tool_choice;
  boost::json::value echo_text;
  boost::json::value echo_metadata;
  boost::json::value echo_reasoning;
};

api_result<responses_request> parse_responses_request(std::string_view body, const parse_limits& limits = default_limits);

}  // namespace strata::api::schema
