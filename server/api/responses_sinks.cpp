#include "server/api/responses_sinks.hpp"

#include <boost/json/object.hpp>

#include "server/api/sinks.hpp"
#include "src/api/response_writer.hpp"

namespace strata::api {
namespace {

namespace json = boost::json;
using block_kind = schema::content_block::kind;
using item_kind = schema::response_item::kind;

sched::request_rejected failure_of(const sched::request_done& d) { return {d.request, 500, d.error, "generation_failed"}; }

/// The response as finished: its items, status and usage.
void finish_state(response_context& ctx, const block_reader& reader, const sched::request_done& d) {
  auto& r = ctx.state;
  r.output.clear();
  for (std::size_t i = 0; i < reader.blocks().size(); ++i) r.output.push_back(item_of(r, reader.blocks()[i], static_cast<int>(i)));
  r.status = d.reason == sched::finish_reason::length ? "incomplete" : "completed";
  if (d.reason == sched::finish_reason::length) r.incomplete_reason = "max_output_tokens";
  r.input_tokens = d.prompt_tokens;
  r.cached_tokens = d.cached_tokens;
  r.output_tokens = d.completion_tokens;
}

/// Keeps the response and its conversation, the output as the assistant's turn.
void keep(response_context& ctx, const block_reader& reader, const std::string& response_json) {
  if (!ctx.store) return;
  json::object turn{{"role", "assistant"}};
  std::string text, reasoning;
  json::array calls;
  for (const auto& b : reader.blocks()) {
    if (b.type == block_kind::text) text += b.text;
    if (b.type == block_kind::thinking) reasoning += b.text;
    if (b.type == block_kind::tool_use)
      calls.push_back(json::object{{"id", b.id}, {"type", "function"}, {"function", json::object{{"name", b.name}, {"arguments", b.text}}}});
  }
  turn["content"] = text.empty() && !calls.empty() ? json::value(nullptr) : json::value(text);
  if (!calls.empty()) turn["tool_calls"] = std::move(calls);
  if (!reasoning.empty()) turn["reasoning_content"] = std::move(reasoning);
  json::array conversation = std::move(ctx.conversation);
  conversation.push_back(std::move(turn));
  ctx.store->put(ctx.state.id, {response_json, std::move(conversation)});
}

io::request_usage log_usage(const schema::response_state& r) {
  return {static_cast<std::int32_t>(r.input_tokens), static_cast<std::int32_t>(r.cached_tokens), static_cast<std::int32_t>(r.output_tokens)};
}

}  // namespace

schema::response_item item_of(const schema::response_state& r, const schema::content_block& b, int index) {
  const std::string suffix = r.id.substr(r.id.find('_') + 1) + "_" + std::to_string(index);
  switch (b.type) {
    case block_kind::text: return {item_kind::message, "msg_" + suffix, b.text, {}, {}, true};
    case block_kind::thinking: return {item_kind::reasoning, "rs_" + suffix, b.text, {}, {}, true};
    case block_kind::tool_use: break;
  }
  return {item_kind::function_call, "fc_" + suffix, b.text, b.id, b.name, true};
}

response_stream_sink::response_stream_sink(response_context ctx, io::reply_address out)
    : ctx_(std::move(ctx)), out_(std::move(out)), reader_(ctx_.output, true) {}

void response_stream_sink::on_admitted(const sched::request_admitted&) {
  if (admitted_ || failed_) return;
  admitted_ = true;
  send(events_.lifecycle("response.created", ctx_.state) + events_.lifecycle("response.in_progress", ctx_.state));
}

void response_stream_sink::on_token(const sched::token_event& e) {
  if (failed_) return;
  reader_.feed(e.text);
  flush();
}

void response_stream_sink::flush(bool at_end) {
  auto item = [&](int i) { return item_of(ctx_.state, reader_.blocks()[static_cast<std::size_t>(i)], i); };
  reader_.stream([&](int i) { send(events_.item_added(i, item(i))); },
                 [&](int i, const std::string& text) { send(events_.delta(i, item(i), text)); },
                 [&](int i) { send(events_.item_done(i, item(i))); }, at_end);
}

void response_stream_sink::on_done(const sched::request_done& d) {
  if (failed_) return;
  if (d.reason == sched::finish_reason::error) return on_rejected(failure_of(d));
  reader_.finish();
  flush(true);
  finish_state(ctx_, reader_, d);
  keep(ctx_, reader_, schema::write_response(ctx_.state));
  const char* type = ctx_.state.status == "incomplete" ? "response.incomplete" : "response.completed";
  out_.send({events_.lifecycle(type, ctx_.state), 0, ctx_.id, log_usage(ctx_.state)});
  out_.close();
}

void response_stream_sink::on_rejected(const sched::request_rejected& r) {
  if (failed_) return;
  failed_ = true;
  const auto err = rejection_error(r);
  if (!admitted_) {
    // Nothing was sent yet: the connection answers with the status itself.
    out_.send({schema::write_error(err), r.status});
    return out_.close();
  }
  ctx_.state.status = "failed";
  ctx_.state.error_message = err.message;
  out_.send({events_.lifecycle("response.failed", ctx_.state), 0, ctx_.id});
  out_.close();
}

response_full_sink::response_full_sink(response_context ctx, io::reply_address out)
    : ctx_(std::move(ctx)), out_(std::move(out)), reader_(ctx_.output, false) {}

void response_full_sink::on_done(const sched::request_done& d) {
  if (failed_) return;
  if (d.reason == sched::finish_reason::error) return on_rejected(failure_of(d));
  reader_.finish();
  finish_state(ctx_, reader_, d);
  std::string body = schema::write_response(ctx_.state);
  keep(ctx_, reader_, body);
  out_.send({std::move(body), 200, ctx_.id, log_usage(ctx_.state)});
}

void response_full_sink::on_rejected(const sched::request_rejected& r) {
  if (failed_) return;
  failed_ = true;
  out_.send({schema::write_error(rejection_error(r)), r.status, ctx_.id});
}

}  // namespace strata::api
