#pragma once
// The sinks of POST /v1/messages: the scheduler's events become Anthropic's message object or its
// stream of named server-sent events (src/api/messages_writer.hpp). The output is read like a chat
// choice's (chat::tool_parser): the answer becomes text blocks, reasoning thinking blocks, and each
// tool call a tool_use block.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/stream/stream_hub.hpp"
#include "io/reply_queue.hpp"
#include "server/api/block_reader.hpp"
#include "src/api/messages_writer.hpp"

namespace strata::api {

/// What every event of one answer needs.
struct message_meta {
  schema::message_head head;
  std::int64_t prompt_tokens = 0;
  /// The request's stop sequences, to name the one that matched.
  std::vector<std::string> stop;
  std::uint64_t id = 0;
  /// How the output is read into text, reasoning and tool calls; empty: it is all text.
  std::optional<chat::parser_options> output;
};

/// The stop reason and sequence of a finished request.
struct finish_info {
  std::string reason;  // end_turn, max_tokens, stop_sequence, tool_use
  const std::string* sequence = nullptr;
};
finish_info stop_of(const message_meta& meta, const sched::request_done& d, bool made_calls);

/// Streams the answer as named SSE events.
class message_stream_sink final : public sched::stream_sink {
 public:
  message_stream_sink(message_meta meta, io::reply_address out);
  void on_admitted(const sched::request_admitted& a) override;
  void on_token(const sched::token_event& e) override;
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  void send(std::string event) { out_.send({std::move(event)}); }
  /// Sends what the reader read since the last call as block events (`at_end`: and the last
  /// block's stop).
  void flush(bool at_end = false);
  void end(std::string last, const schema::message_usage& u);

  message_meta meta_;
  io::reply_address out_;
  block_reader reader_;
  bool admitted_ = false;
  bool failed_ = false;
};

/// Collects the whole answer and delivers it as one message object.
class message_full_sink final : public sched::stream_sink {
 public:
  message_full_sink(message_meta meta, io::reply_address out);
  void on_admitted(const sched::request_admitted&) override {}
  void on_token(const sched::token_event& e) override { reader_.feed(e.text); }
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  message_meta meta_;
  io::reply_address out_;
  block_reader reader_;
  bool failed_ = false;
};

}  // namespace strata::api
