#pragma once
// The envelope of client messages on the WebSocket endpoint /v1/ws:
//   {"type":"request","id":ID,"endpoint":"chat.completions"|"completions","body":{...}}
//   {"type":"cancel","id":ID}
// ID is a string or a number and is echoed back byte for byte in every frame about it.

#include <optional>
#include <string>
#include <string_view>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"

namespace strata::api::schema {

/// One client message, as far as it could be read.
struct ws_envelope {
  enum class kind { request, cancel };
  enum class target { chat_completions, completions };
  kind type = kind::request;
  /// The id exactly as it appeared in the frame (a JSON string with its quotes, or a number);
  /// empty when the frame had none that could be read.
  std::string id_json;
  target endpoint = target::chat_completions;
  /// The request body's JSON text, for parse_chat_request or parse_completion_request.
  std::string body;
};

/// Parses one text frame into `out`. On failure `out.id_json` still holds the id when it was read,
/// so that the error frame can name the request.
api_status parse_ws_envelope(std::string_view frame, ws_envelope& out, const parse_limits& limits = default_limits);

}  // namespace strata::api::schema
