#include "server/api/messages_sinks.hpp"

#include "server/api/sinks.hpp"
#include "src/api/messages_request.hpp"

namespace strata::api {
namespace {

using kind = schema::content_block::kind;

schema::message_usage usage_of(const message_meta& meta, const sched::request_done& d) {
  return {d.prompt_tokens > 0 ? d.prompt_tokens : meta.prompt_tokens, d.cached_tokens, d.completion_tokens};
}

io::request_usage log_usage(const schema::message_usage& u) {
  return {static_cast<std::int32_t>(u.input_tokens), static_cast<std::int32_t>(u.cache_read_input_tokens),
          static_cast<std::int32_t>(u.output_tokens)};
}

sched::request_rejected failure_of(const sched::request_done& d) { return {d.request, 500, d.error, "generation_failed"}; }

}  // namespace

finish_info stop_of(const message_meta& meta, const sched::request_done& d, bool made_calls) {
  if (d.reason == sched::finish_reason::length) return {"max_tokens", nullptr};
  if (d.stop_index >= 0 && static_cast<std::size_t>(d.stop_index) < meta.stop.size())
    return {"stop_sequence", &meta.stop[static_cast<std::size_t>(d.stop_index)]};
  return {made_calls ? "tool_use" : "end_turn", nullptr};
}

message_stream_sink::message_stream_sink(message_meta meta, io::reply_address out)
    : meta_(std::move(meta)), out_(std::move(out)), reader_(meta_.output, true) {}

void message_stream_sink::on_admitted(const sched::request_admitted&) {
  if (admitted_ || failed_) return;
  admitted_ = true;
  send(schema::write_message_start(meta_.head, {meta_.prompt_tokens, 0, 0}));
}

void message_stream_sink::on_token(const sched::token_event& e) {
  if (failed_) return;
  reader_.feed(e.text);
  flush();
}

void message_stream_sink::flush(bool at_end) {
  const auto& blocks = reader_.blocks();
  auto block = [&](int i) -> const schema::content_block& { return blocks[static_cast<std::size_t>(i)]; };
  reader_.stream([&](int i) { send(schema::write_block_start(i, {block(i).type, {}, block(i).id, block(i).name})); },
                 [&](int i, const std::string& text) { send(schema::write_block_delta(i, block(i).type, text)); },
                 [&](int i) { send(schema::write_block_stop(i)); }, at_end);
}

void message_stream_sink::on_done(const sched::request_done& d) {
  if (failed_) return;
  if (d.reason == sched::finish_reason::error) return on_rejected(failure_of(d));
  reader_.finish();
  flush(true);
  const auto stop = stop_of(meta_, d, reader_.made_calls());
  const auto usage = usage_of(meta_, d);
  send(schema::write_message_delta(stop.reason, stop.sequence, usage.output_tokens));
  end(schema::write_message_stop(), usage);
}

void message_stream_sink::end(std::string last, const schema::message_usage& u) {
  out_.send({std::move(last), 0, meta_.id, log_usage(u)});
  out_.close();
}

void message_stream_sink::on_rejected(const sched::request_rejected& r) {
  if (failed_) return;
  failed_ = true;
  const auto err = rejection_error(r);
  if (!admitted_) {
    // Nothing was sent yet: the connection answers with the status itself.
    out_.send({schema::write_anthropic_error(err), r.status});
    return out_.close();
  }
  end(schema::sse_named_event("error", schema::write_anthropic_error(err)), {});
}

message_full_sink::message_full_sink(message_meta meta, io::reply_address out)
    : meta_(std::move(meta)), out_(std::move(out)), reader_(meta_.output, false) {}

void message_full_sink::on_done(const sched::request_done& d) {
  if (failed_) return;
  if (d.reason == sched::finish_reason::error) return on_rejected(failure_of(d));
  reader_.finish();
  const auto stop = stop_of(meta_, d, reader_.made_calls());
  const auto usage = usage_of(meta_, d);
  out_.send({schema::write_message(meta_.head, reader_.blocks(), stop.reason, stop.sequence, usage), 200, meta_.id, log_usage(usage)});
}

void message_full_sink::on_rejected(const sched::request_rejected& r) {
  if (failed_) return;
  failed_ = true;
  out_.send({schema::write_anthropic_error(rejection_error(r)), r.status, meta_.id});
}

}  // namespace strata::api
