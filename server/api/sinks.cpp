#include "server/api/sinks.hpp"

#include "src/api/stream_framing.hpp"

namespace strata::api {
namespace {

const char* finish_name(sched::finish_reason r) { return r == sched::finish_reason::length ? "length" : "stop"; }

/// A choice that ended normally after making calls finished with them.
const char* finish_name(sched::finish_reason r, const std::optional<chat::tool_parser>& parser) {
  return r == sched::finish_reason::stop && parser && parser->calls() > 0 ? "tool_calls" : finish_name(r);
}

/// What the parser reads of a token: its text and, for a control token that is markup of the
/// format (which the detokenizer drops), that markup.
std::string parser_text(const response_meta& meta, const sched::token_event& e) {
  std::string text = e.text;
  const auto& markup = meta.output->format.control_markup;
  if (e.token < 0 || markup.empty() || meta.tok->type(e.token) != tokenizer::token_type::control) return text;
  const std::string_view piece = meta.tok->token_text(e.token);
  for (const auto& m : markup)
    if (m == piece) text += m;
  return text;
}

/// One position's logprobs with the tokens spelled as raw bytes (the writer names them).
schema::token_logprob logprob_of(const tokenizer::tokenizer& tok, const sched::token_event& e) {
  schema::token_logprob lp{tok.token_to_piece(e.token, false), e.logprob, {}};
  lp.top.reserve(e.top_logprobs.size());
  for (const auto& [id, alt] : e.top_logprobs) lp.top.push_back({tok.token_to_piece(id, false), alt});
  return lp;
}

/// A choice that ended in error is reported like a refusal.
sched::request_rejected failure_of(const sched::request_done& d) { return {d.request, 500, d.error, "generation_failed"}; }

void cancel_others(const response_meta& meta, std::uint64_t failed) {
  for (auto id : meta.ids)
    if (id != failed) meta.scheduler.tell(sched::cancel{id});
}

void add_usage(schema::usage_counts& u, const sched::request_done& d, const response_meta& meta) {
  // The choices of a prompt share it (its first choice computed it, the others reuse its KV):
  // each prompt counts once, as its first choice saw it; completions add up.
  if (d.index % meta.per_prompt == 0) {
    u.prompt_tokens += d.prompt_tokens;
    u.cached_tokens += d.cached_tokens;
    u.ssd_cached_tokens += d.ssd_cached_tokens;
    u.host_cached_tokens += d.host_cached_tokens;
  }
  u.completion_tokens += d.completion_tokens;
}

/// Completions with echo: the text that precedes choice i (its prompt's); empty without echo.
const std::string& echo_of(const response_meta& meta, int i) {
  static const std::string none;
  return meta.echo.empty() ? none : meta.echo[static_cast<std::size_t>(i / meta.per_prompt)];
}

/// A complete response's usage, for the request's access-log line.
io::request_usage log_usage(const schema::usage_counts& u) { return {u.prompt_tokens, u.cached_tokens, u.completion_tokens}; }

}  // namespace

std::vector<std::optional<chat::tool_parser>> make_parsers(const response_meta& meta) {
  std::vector<std::optional<chat::tool_parser>> parsers(static_cast<std::size_t>(meta.n));
  if (meta.output)
    for (auto& p : parsers) p.emplace(*meta.output);
  return parsers;
}

schema::api_error rejection_error(const sched::request_rejected& r) {
  std::string type = r.status == 429 ? "rate_limit_error" : r.status >= 500 ? "server_error" : "invalid_request_error";
  return schema::api_error{r.status, r.message, std::move(type), {}, r.code};
}

chunk_sink::chunk_sink(response_meta meta, io::reply_address out, framing f, std::string ws_id_json)
    : meta_(std::move(meta)), out_(std::move(out)), framing_(f), ws_id_(std::move(ws_id_json)),
      text_offsets_(static_cast<std::size_t>(meta_.n), 0), parsers_(make_parsers(meta_)) {}

void chunk_sink::send(const std::string& chunk_json) {
  out_.send({framing_ == framing::sse ? schema::sse_event(chunk_json) : schema::ws_chunk_frame(ws_id_, chunk_json)});
}

void chunk_sink::on_admitted(const sched::request_admitted&) {
  if (admitted_ || failed_) return;
  admitted_ = true;
  // The first part, even an empty one, lets the connection send the status line and headers.
  if (!meta_.chat && meta_.echo.empty()) return (void)out_.send({});
  if (!meta_.chat) {
    for (int i = 0; i < meta_.n; ++i) {
      const std::string& echo = echo_of(meta_, i);
      send(schema::write_text_chunk(meta_.head, i, echo, nullptr, 0, std::nullopt, meta_.include_usage));
      text_offsets_[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(echo.size());
    }
    return;
  }
  for (int i = 0; i < meta_.n; ++i) send(schema::write_chat_role_chunk(meta_.head, i, meta_.include_usage));
}

void chunk_sink::send_events(int index, const std::vector<chat::parse_event>& events, const std::vector<schema::token_logprob>* logprobs) {
  for (const auto& ev : events) {
    switch (ev.type) {
      case chat::parse_event::kind::content:
        send(schema::write_chat_content_chunk(meta_.head, index, ev.text, std::exchange(logprobs, nullptr), meta_.include_usage));
        break;
      case chat::parse_event::kind::reasoning:
        send(schema::write_chat_reasoning_chunk(meta_.head, index, ev.text, meta_.include_usage));
        break;
      case chat::parse_event::kind::call:
        send(schema::write_chat_tool_call_start_chunk(meta_.head, index, ev.index, ev.call, meta_.include_usage));
        send(schema::write_chat_tool_call_arguments_chunk(meta_.head, index, ev.index, ev.call.arguments, meta_.include_usage));
        break;
    }
  }
  if (logprobs) send(schema::write_chat_content_chunk(meta_.head, index, "", logprobs, meta_.include_usage));
}

void chunk_sink::on_token(const sched::token_event& e) {
  if (failed_) return;
  auto& parser = parsers_[static_cast<std::size_t>(e.index)];
  std::string text = parser ? parser_text(meta_, e) : std::string();
  if ((parser ? text : e.text).empty() && !meta_.logprobs) return;
  std::vector<schema::token_logprob> lps;
  if (meta_.logprobs && e.token >= 0) lps.push_back(logprob_of(*meta_.tok, e));
  const auto* lp = meta_.logprobs ? &lps : nullptr;
  if (parser) {
    send_events(e.index, parser->feed(text), lp);
  } else if (meta_.chat) {
    send(schema::write_chat_content_chunk(meta_.head, e.index, e.text, lp, meta_.include_usage));
  } else {
    auto& offset = text_offsets_[static_cast<std::size_t>(e.index)];
    send(schema::write_text_chunk(meta_.head, e.index, e.text, lp, offset, std::nullopt, meta_.include_usage));
    offset += static_cast<std::int64_t>(e.text.size());
  }
}

void chunk_sink::on_done(const sched::request_done& d) {
  if (failed_) return;
  if (d.reason == sched::finish_reason::error) return on_rejected(failure_of(d));
  add_usage(usage_, d, meta_);
  auto& parser = parsers_[static_cast<std::size_t>(d.index)];
  if (parser) send_events(d.index, parser->finish(), nullptr);
  if (meta_.chat) {
    send(schema::write_chat_finish_chunk(meta_.head, d.index, finish_name(d.reason, parser), meta_.include_usage));
  } else {
    send(schema::write_text_chunk(meta_.head, d.index, "", nullptr, 0, std::string_view(finish_name(d.reason)), meta_.include_usage));
  }
  if (++done_ < meta_.n) return;
  if (meta_.include_usage)
    send(meta_.chat ? schema::write_chat_usage_chunk(meta_.head, usage_) : schema::write_text_usage_chunk(meta_.head, usage_));
  finish(framing_ == framing::sse ? std::string(schema::sse_done()) : schema::ws_done_frame(ws_id_));
}

void chunk_sink::finish(std::string data) {
  out_.send({std::move(data), 0, meta_.ids.front(), log_usage(usage_)});
  if (framing_ == framing::sse) out_.close();
}

void chunk_sink::on_rejected(const sched::request_rejected& r) {
  if (failed_) return;
  failed_ = true;
  cancel_others(meta_, r.request);
  auto err = rejection_error(r);
  if (framing_ == framing::websocket) return finish(schema::ws_error_frame(ws_id_, err));
  if (!admitted_) {
    // Nothing was sent yet: the connection answers with the status itself.
    out_.send({schema::write_error(err), r.status});
    return out_.close();
  }
  // The status line is long gone: the error travels as an event, then the stream ends.
  send(schema::write_error(err));
  finish(std::string(schema::sse_done()));
}

full_sink::full_sink(response_meta meta, io::reply_address out)
    : meta_(std::move(meta)), out_(std::move(out)), choices_(static_cast<std::size_t>(meta_.n)) {
  auto parsers = make_parsers(meta_);
  for (std::size_t i = 0; i < choices_.size(); ++i) choices_[i].parser = std::move(parsers[i]);
}

void full_sink::choice_state::take(const std::vector<chat::parse_event>& events) {
  for (const auto& ev : events) {
    if (ev.type == chat::parse_event::kind::content) text += ev.text;
    else if (ev.type == chat::parse_event::kind::reasoning) reasoning += ev.text;
    else calls.push_back(ev.call);
  }
}

void full_sink::on_token(const sched::token_event& e) {
  auto& c = choices_[static_cast<std::size_t>(e.index)];
  if (c.parser) c.take(c.parser->feed(parser_text(meta_, e)));
  else c.text += e.text;
  if (meta_.logprobs && e.token >= 0) c.logprobs.push_back(logprob_of(*meta_.tok, e));
  if (meta_.token_ids && e.token >= 0) c.ids.push_back(e.token);
}

void full_sink::on_done(const sched::request_done& d) {
  if (failed_) return;
  if (d.reason == sched::finish_reason::error) return on_rejected(failure_of(d));
  auto& choice = choices_[static_cast<std::size_t>(d.index)];
  if (choice.parser) choice.take(choice.parser->finish());
  choice.finish = finish_name(d.reason, choice.parser);
  add_usage(usage_, d, meta_);
  if (++done_ < meta_.n) return;
  std::string body;
  if (meta_.chat) {
    std::vector<schema::chat_choice> out;
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      auto& c = choices_[i];
      out.push_back({static_cast<int>(i), std::move(c.text), std::move(c.reasoning), std::move(c.calls), meta_.logprobs,
                     std::move(c.logprobs), c.finish});
    }
    body = schema::write_chat_completion(meta_.head, out, usage_);
  } else {
    std::vector<schema::text_choice> out;
    for (std::size_t i = 0; i < choices_.size(); ++i) {
      auto& c = choices_[i];
      const std::string& echo = echo_of(meta_, static_cast<int>(i));
      out.push_back({static_cast<int>(i), echo + c.text, meta_.logprobs, std::move(c.logprobs), static_cast<std::int64_t>(echo.size()), c.finish});
      if (meta_.token_ids) out.back().token_ids = std::move(c.ids);
    }
    body = schema::write_text_completion(meta_.head, out, usage_);
  }
  out_.send({std::move(body), 200, meta_.ids.front(), log_usage(usage_)});
}

void full_sink::on_rejected(const sched::request_rejected& r) {
  if (failed_) return;
  failed_ = true;
  cancel_others(meta_, r.request);
  out_.send({schema::write_error(rejection_error(r)), r.status, meta_.ids.front()});
}

}  // namespace strata::api
