#pragma once
// The answers of POST /v1/messages in Anthropic's shapes: one message object, or the stream of
// server-sent events (each `event: TYPE\ndata: {...}\n\n`):
//
//   message_start, then per content block content_block_start / content_block_delta... /
//   content_block_stop, then message_delta (stop_reason, output tokens) and message_stop.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::api::schema {

/// What every event of one answer repeats.
struct message_head {
  std::string id;  // msg_...
  std::string model;
};

/// One content block of an answer.
struct content_block {
  enum class kind { text, thinking, tool_use };
  kind type = kind::text;
  /// text: the text; thinking: the reasoning; tool_use: the input, as JSON text.
  std::string text;
  /// tool_use only.
  std::string id;
  std::string name;
};

struct message_usage {
  std::int64_t input_tokens = 0;
  std::int64_t cache_read_input_tokens = 0;
  std::int64_t output_tokens = 0;
};

/// The whole answer. `stop_reason`: end_turn, max_tokens, stop_sequence or tool_use;
/// `stop_sequence`: the one that matched (stop_sequence only).
std::string write_message(const message_head& head, const std::vector<content_block>& content, std::string_view stop_reason,
                          const std::string* stop_sequence, const message_usage& usage);

/// `event: TYPE\ndata: JSON\n\n`.
std::string sse_named_event(std::string_view type, std::string_view json);

std::string write_message_start(const message_head& head, const message_usage& usage);
/// A block's start: an empty text / thinking block, or a tool_use with its id and name and `{}`.
std::string write_block_start(int index, const content_block& block);
/// A piece of a block: text_delta, thinking_delta or input_json_delta (partial_json).
std::string write_block_delta(int index, content_block::kind type, std::string_view piece);
std::string write_block_stop(int index);
std::string write_message_delta(std::string_view stop_reason, const std::string* stop_sequence, std::int64_t output_tokens);
std::string write_message_stop();

}  // namespace strata::api::schema
