#pragma once
// The answers of POST /v1/responses: the response object, and the stream of server-sent events
// (`event: TYPE\ndata: {...,"sequence_number":N}\n\n`) the SDKs read:
//
//   response.created, response.in_progress,
//   per output item: response.output_item.added, then
//     message:       response.content_part.added, response.output_text.delta..., response.output_text.done,
//                    response.content_part.done
//     reasoning:     response.reasoning_text.delta..., response.reasoning_text.done
//     function_call: response.function_call_arguments.delta..., response.function_call_arguments.done
//   response.output_item.done; and last response.completed (or response.incomplete, response.failed).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

namespace strata::api::schema {

/// One output item.
struct response_item {
  enum class kind { message, reasoning, function_call };
  kind type = kind::message;
  std::string id;  // msg_..., rs_..., fc_...
  /// message: the text; reasoning: the reasoning text; function_call: the arguments (JSON text).
  std::string text;
  std::string call_id;  // function_call
  std::string name;     // function_call
  bool done = true;
};

/// A response as the object shows it.
struct response_state {
  std::string id;  // resp_...
  std::int64_t created_at = 0;
  std::string model;
  /// in_progress, completed, incomplete or failed.
  std::string status = "in_progress";
  /// incomplete: "max_output_tokens"; failed: the error message.
  std::string incomplete_reason;
  std::string error_message;
  std::vector<response_item> output;
  std::int64_t input_tokens = 0, cached_tokens = 0, output_tokens = 0;
  /// What the request said, repeated (see responses_request's echo members).
  boost::json::value instructions, tools, tool_choice, text, metadata, reasoning;
  bool parallel_tool_calls = true, store = true;
  double temperature = 1.0, top_p = 1.0;
  std::int64_t max_output_tokens = 0;  // 0: none given
  std::string previous_response_id;
};

std::string write_response(const response_state& r);

/// The stream's events; each takes the next sequence number.
class response_events {
 public:
  /// response.created or response.in_progress (the object so far), response.completed,
  /// response.incomplete or response.failed (the whole object).
  std::string lifecycle(std::string_view type, const response_state& r);
  /// response.output_item.added (the item as begun) or response.output_item.done, and for a message
  /// the content part's added / done around it.
  std::string item_added(int output_index, const response_item& item);
  std::string item_done(int output_index, const response_item& item);
  /// A piece of an item: output_text.delta, reasoning_text.delta or function_call_arguments.delta.
  std::string delta(int output_index, const response_item& item, std::string_view piece);

 private:
  std::string event(std::string_view type, std::string json_without_close);
  std::int64_t seq_ = 0;
};

}  // namespace strata::api::schema
