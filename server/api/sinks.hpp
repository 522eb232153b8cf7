#pragma once
// The sinks of the generating endpoints: the scheduler's events become OpenAI chunks and
// responses (written by response_writer), framed as SSE events, WebSocket frames or one body.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/reply_queue.hpp"
#include "src/api/response_writer.hpp"
#include "src/chat/tool_parser.hpp"
#include "actors/stream/stream_hub.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::api {

using sched::open_stream;
using sched::stream_sink;
using stream::hub_address;

/// What every chunk and response of one request repeats, and what its sinks need to know.
struct response_meta {
  bool chat = true;
  schema::response_head head;  // id chatcmpl-... / cmpl-..., created, model
  int n = 1;
  bool logprobs = false;
  bool include_usage = false;
  std::shared_ptr<const tokenizer::tokenizer> tok;
  /// Scheduler ids of the choices, to cancel the others when one is refused.
  std::vector<std::uint64_t> ids;
  sched::scheduler_address scheduler;
  /// Chat: how each choice's text is read into content, reasoning and tool calls; empty: it is all
  /// content, sent as it comes.
  std::optional<chat::parser_options> output;
  /// Choices per prompt (`n`): choice i answers prompt i / per_prompt (completions may give several
  /// prompts), whose first choice reports its usage.
  int per_prompt = 1;
  /// Completions with `echo`: each prompt's text, which precedes its choices' text; empty: none.
  std::vector<std::string> echo;
  /// Completions with `return_token_ids`: each choice lists the ids it generated.
  bool token_ids = false;
};

/// One choice's reader of its output (when meta.output is set).
std::vector<std::optional<chat::tool_parser>> make_parsers(const response_meta& meta);

/// Streams chunks: SSE (`data: {...}\n\n`, then `data: [DONE]\n\n`) or WebSocket frames
/// (`{"type":"chunk","id":ID,"data":{...}}`, then `{"type":"done","id":ID}`), each one part sent to
/// the connection's reply queue. The first part goes when the scheduler has admitted the request
/// (the assistant role chunks, for chat): an SSE stream refused before that is answered with its
/// status instead (429), a part with the status and the error body.
class chunk_sink final : public stream_sink {
 public:
  enum class framing { sse, websocket };
  /// `ws_id_json` is the client's id as it wrote it (WebSocket framing only).
  chunk_sink(response_meta meta, io::reply_address out, framing f, std::string ws_id_json = {});

  void on_admitted(const sched::request_admitted& a) override;
  void on_token(const sched::token_event& e) override;
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  void send(const std::string& chunk_json);
  /// Sends a choice's parsed events as chunks; `logprobs` (the token's) go with the first content
  /// chunk, or with an empty one.
  void send_events(int index, const std::vector<chat::parse_event>& events, const std::vector<schema::token_logprob>* logprobs);
  /// The last part: `data` and what the request used; an SSE stream ends with it.
  void finish(std::string data);

  response_meta meta_;
  io::reply_address out_;
  framing framing_;
  std::string ws_id_;
  std::vector<std::int64_t> text_offsets_;  // completions: bytes sent per choice, for text_offset
  std::vector<std::optional<chat::tool_parser>> parsers_;
  int done_ = 0;
  schema::usage_counts usage_;
  bool admitted_ = false;
  bool failed_ = false;
};

/// Collects the whole response and delivers it as one part: its status and JSON body.
class full_sink final : public stream_sink {
 public:
  full_sink(response_meta meta, io::reply_address out);
  void on_admitted(const sched::request_admitted&) override {}
  void on_token(const sched::token_event& e) override;
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  struct choice_state {
    std::string text;
    std::vector<schema::token_logprob> logprobs;
    std::vector<std::int32_t> ids;
    std::string finish = "stop";
    std::optional<chat::tool_parser> parser;
    std::string reasoning;
    std::vector<chat::tool_call> calls;
    void take(const std::vector<chat::parse_event>& events);
  };
  response_meta meta_;
  io::reply_address out_;
  std::vector<choice_state> choices_;
  int done_ = 0;
  schema::usage_counts usage_;
  bool failed_ = false;
};

/// The error a refused or failed choice becomes.
schema::api_error rejection_error(const sched::request_rejected& r);

}  // namespace strata::api
