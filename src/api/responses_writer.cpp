#include "src/api/responses_writer.hpp"

#include <boost/json/serialize.hpp>

#include "src/api/json_writer.hpp"
#include "src/api/messages_writer.hpp"

namespace strata::api::schema {
namespace {

using kind = response_item::kind;

void write_json_or_null(json_writer& w, std::string_view key, const boost::json::value& v) {
  w.key(key).raw(boost::json::serialize(v));
}

void write_text_part(json_writer& w, std::string_view text) {
  w.begin_object().member("type", "output_text").member("text", text).key("annotations").begin_array().end_array();
  w.key("logprobs").begin_array().end_array().end_object();
}

/// An item; `begun`: as output_item.added shows it (empty, in progress).
void write_item(json_writer& w, const response_item& it, bool begun) {
  const std::string_view status = begun || !it.done ? "in_progress" : "completed";
  const std::string_view text = begun ? std::string_view() : std::string_view(it.text);
  w.begin_object().member("id", it.id);
  switch (it.type) {
    case kind::message:
      w.member("type", "message").member("status", status).member("role", "assistant").key("content").begin_array();
      if (!begun) write_text_part(w, text);
      w.end_array();
      break;
    case kind::reasoning:
      w.member("type", "reasoning").key("summary").begin_array().end_array().key("content").begin_array();
      if (!begun) w.begin_object().member("type", "reasoning_text").member("text", text).end_object();
      w.end_array();
      break;
    case kind::function_call:
      w.member("type", "function_call").member("status", status).member("call_id", it.call_id).member("name", it.name);
      w.member("arguments", text);
      break;
  }
  w.end_object();
}

void write_response_object(json_writer& w, const response_state& r) {
  w.begin_object().member("id", r.id).member("object", "response").key("created_at").number(r.created_at);
  w.member("status", r.status).member("model", r.model);
  if (r.status == "failed") {
    w.key("error").begin_object().member("code", "server_error").member("message", r.error_message).end_object();
  } else {
    w.key("error").null();
  }
  if (r.status == "incomplete") {
    w.key("incomplete_details").begin_object().member("reason", r.incomplete_reason).end_object();
  } else {
    w.key("incomplete_details").null();
  }
  write_json_or_null(w, "instructions", r.instructions);
  if (r.max_output_tokens > 0) {
    w.key("max_output_tokens").number(r.max_output_tokens);
  } else {
    w.key("max_output_tokens").null();
  }
  write_json_or_null(w, "metadata", r.metadata.is_null() ? boost::json::value(boost::json::object()) : r.metadata);
  w.key("output").begin_array();
  for (const auto& it : r.output) write_item(w, it, false);
  w.end_array();
  w.key("parallel_tool_calls").boolean(r.parallel_tool_calls);
  if (r.previous_response_id.empty()) {
    w.key("previous_response_id").null();
  } else {
    w.member("previous_response_id", r.previous_response_id);
  }
  write_json_or_null(w, "reasoning", r.reasoning);
  w.key("store").boolean(r.store).key("temperature").number(r.temperature).key("top_p").number(r.top_p);
  write_json_or_null(w, "text", r.text);
  write_json_or_null(w, "tool_choice", r.tool_choice);
  write_json_or_null(w, "tools", r.tools);
  w.member("truncation", "disabled");
  if (r.status == "in_progress") {
    w.key("usage").null();
  } else {
    w.key("usage").begin_object().key("input_tokens").number(r.input_tokens);
    w.key("input_tokens_details").begin_object().key("cached_tokens").number(r.cached_tokens).end_object();
    w.key("output_tokens").number(r.output_tokens);
    w.key("output_tokens_details").begin_object().key("reasoning_tokens").number(std::int64_t{0}).end_object();
    w.key("total_tokens").number(r.input_tokens + r.output_tokens).end_object();
  }
  w.end_object();
}

/// The members that locate a piece of an item: item_id, output_index (and content_index).
void write_place(json_writer& w, int output_index, const response_item& it) {
  w.member("item_id", it.id).key("output_index").number(std::int64_t{output_index});
  if (it.type != kind::function_call) w.key("content_index").number(std::int64_t{0});
}

}  // namespace

std::string write_response(const response_state& r) {
  json_writer w;
  write_response_object(w, r);
  return w.take();
}

std::string response_events::event(std::string_view type, std::string json) {
  // `json` is an object still open: the sequence number closes it.
  json += ",\"sequence_number\":" + std::to_string(seq_++) + "}";
  return sse_named_event(type, json);
}

std::string response_events::lifecycle(std::string_view type, const response_state& r) {
  json_writer w;
  w.begin_object().member("type", type).key("response");
  write_response_object(w, r);
  std::string s = w.take();
  return event(type, s);
}

std::string response_events::item_added(int output_index, const response_item& item) {
  json_writer w;
  w.begin_object().member("type", "response.output_item.added").key("output_index").number(std::int64_t{output_index}).key("item");
  write_item(w, item, true);
  std::string out = event("response.output_item.added", w.take());
  if (item.type == kind::message) {
    json_writer p;
    p.begin_object().member("type", "response.content_part.added");
    write_place(p, output_index, item);
    p.key("part");
    write_text_part(p, "");
    out += event("response.content_part.added", p.take());
  }
  return out;
}

std::string response_events::delta(int output_index, const response_item& item, std::string_view piece) {
  const std::string_view type = item.type == kind::message     ? "response.output_text.delta"
                                : item.type == kind::reasoning ? "response.reasoning_text.delta"
                                                               : "response.function_call_arguments.delta";
  json_writer w;
  w.begin_object().member("type", type);
  write_place(w, output_index, item);
  w.member("delta", piece);
  if (item.type == kind::message) w.key("logprobs").begin_array().end_array();
  return event(type, w.take());
}

std::string response_events::item_done(int output_index, const response_item& item) {
  std::string out;
  json_writer w;
  switch (item.type) {
    case kind::message: {
      w.begin_object().member("type", "response.output_text.done");
      write_place(w, output_index, item);
      w.member("text", item.text).key("logprobs").begin_array().end_array();
      out += event("response.output_text.done", w.take());
      json_writer p;
      p.begin_object().member("type", "response.content_part.done");
      write_place(p, output_index, item);
      p.key("part");
      write_text_part(p, item.text);
      out += event("response.content_part.done", p.take());
      break;
    }
    case kind::reasoning:
      w.begin_object().member("type", "response.reasoning_text.done");
      write_place(w, output_index, item);
      w.member("text", item.text);
      out += event("response.reasoning_text.done", w.take());
      break;
    case kind::function_call:
      w.begin_object().member("type", "response.function_call_arguments.done");
      write_place(w, output_index, item);
      w.member("name", item.name).member("arguments", item.text);
      out += event("response.function_call_arguments.done", w.take());
      break;
  }
  json_writer d;
  d.begin_object().member("type", "response.output_item.done").key("output_index").number(std::int64_t{output_index}).key("item");
  write_item(d, item, false);
  out += event("response.output_item.done", d.take());
  return out;
}

}  // namespace strata::api::schema
