#include "src/api/messages_writer.hpp"

#include "src/api/json_writer.hpp"

namespace strata::api::schema {
namespace {

std::string_view type_name(content_block::kind k) {
  return k == content_block::kind::text ? "text" : k == content_block::kind::thinking ? "thinking" : "tool_use";
}

void write_usage(json_writer& w, const message_usage& u) {
  w.key("usage").begin_object();
  w.key("input_tokens").number(u.input_tokens);
  w.key("cache_creation_input_tokens").number(std::int64_t{0});
  w.key("cache_read_input_tokens").number(u.cache_read_input_tokens);
  w.key("output_tokens").number(u.output_tokens);
  w.end_object();
}

/// A block as the message holds it; `empty`: as content_block_start announces it.
void write_block(json_writer& w, const content_block& b, bool empty) {
  w.begin_object().member("type", type_name(b.type));
  switch (b.type) {
    case content_block::kind::text:
      w.member("text", empty ? "" : b.text);
      break;
    case content_block::kind::thinking:
      w.member("thinking", empty ? "" : b.text).member("signature", "");
      break;
    case content_block::kind::tool_use:
      w.member("id", b.id).member("name", b.name).key("input").raw(empty || b.text.empty() ? "{}" : b.text);
      break;
  }
  w.end_object();
}

/// The message object; `head_only`: as message_start announces it (no content, no stop reason).
void write_message_object(json_writer& w, const message_head& head, const std::vector<content_block>* content,
                          std::string_view stop_reason, const std::string* stop_sequence, const message_usage& usage) {
  w.begin_object().member("id", head.id).member("type", "message").member("role", "assistant").member("model", head.model);
  w.key("content").begin_array();
  if (content)
    for (const auto& b : *content) write_block(w, b, false);
  w.end_array();
  if (stop_reason.empty()) {
    w.key("stop_reason").null();
  } else {
    w.member("stop_reason", stop_reason);
  }
  if (stop_sequence) {
    w.member("stop_sequence", *stop_sequence);
  } else {
    w.key("stop_sequence").null();
  }
  write_usage(w, usage);
  w.end_object();
}

}  // namespace

std::string write_message(const message_head& head, const std::vector<content_block>& content, std::string_view stop_reason,
                          const std::string* stop_sequence, const message_usage& usage) {
  json_writer w;
  write_message_object(w, head, &content, stop_reason, stop_sequence, usage);
  return w.take();
}

std::string sse_named_event(std::string_view type, std::string_view json) {
  std::string out;
  out.reserve(json.size() + type.size() + 16);
  out.append("event: ").append(type).append("\ndata: ").append(json).append("\n\n");
  return out;
}

std::string write_message_start(const message_head& head, const message_usage& usage) {
  json_writer w;
  w.begin_object().member("type", "message_start").key("message");
  write_message_object(w, head, nullptr, {}, nullptr, usage);
  w.end_object();
  return sse_named_event("message_start", w.str());
}

std::string write_block_start(int index, const content_block& block) {
  json_writer w;
  w.begin_object().member("type", "content_block_start").key("index").number(std::int64_t{index}).key("content_block");
  write_block(w, block, true);
  w.end_object();
  return sse_named_event("content_block_start", w.str());
}

std::string write_block_delta(int index, content_block::kind type, std::string_view piece) {
  json_writer w;
  w.begin_object().member("type", "content_block_delta").key("index").number(std::int64_t{index}).key("delta").begin_object();
  switch (type) {
    case content_block::kind::text: w.member("type", "text_delta").member("text", piece); break;
    case content_block::kind::thinking: w.member("type", "thinking_delta").member("thinking", piece); break;
    case content_block::kind::tool_use: w.member("type", "input_json_delta").member("partial_json", piece); break;
  }
  w.end_object().end_object();
  return sse_named_event("content_block_delta", w.str());
}

std::string write_block_stop(int index) {
  json_writer w;
  w.begin_object().member("type", "content_block_stop").key("index").number(std::int64_t{index}).end_object();
  return sse_named_event("content_block_stop", w.str());
}

std::string write_message_delta(std::string_view stop_reason, const std::string* stop_sequence, std::int64_t output_tokens) {
  json_writer w;
  w.begin_object().member("type", "message_delta").key("delta").begin_object().member("stop_reason", stop_reason);
  if (stop_sequence) {
    w.member("stop_sequence", *stop_sequence);
  } else {
    w.key("stop_sequence").null();
  }
  w.end_object().key("usage").begin_object().key("output_tokens").number(output_tokens).end_object().end_object();
  return sse_named_event("message_delta", w.str());
}

std::string write_message_stop() { return sse_named_event("message_stop", R"({"type":"message_stop"})"); }

}  // namespace strata::api::schema
