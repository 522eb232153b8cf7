#pragma once
// The sinks of the generating endpoints: the scheduler's events become OpenAI chunks and
// responses (written by response_writer), framed as SSE events, WebSocket frames or one body.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/http_types.hpp"
#include "io/response_slot.hpp"
#include "io/stream_channel.hpp"
#include "src/api/response_writer.hpp"
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
  /// Called once when the stream has ended, whichever way (WebSocket bookkeeping).
  std::function<void()> on_end;
  /// Where the usage goes for the access log once the response is complete (may be null).
  std::shared_ptr<io::request_usage> usage;
};

/// Streams chunks: SSE (`data: {...}\n\n`, then `data: [DONE]\n\n`) or WebSocket frames
/// (`{"type":"chunk","id":ID,"data":{...}}`, then `{"type":"done","id":ID}`).
class chunk_sink final : public stream_sink {
 public:
  enum class framing { sse, websocket };
  /// `ws_id_json` is the client's id as it wrote it (WebSocket framing only).
  chunk_sink(response_meta meta, std::shared_ptr<io::stream_channel> out, framing f, std::string ws_id_json = {});

  /// The first chunks (the assistant role, for chat), sent before any token.
  void start();
  void on_token(const sched::token_event& e) override;
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  void send(const std::string& chunk_json);
  void finish_stream();

  response_meta meta_;
  std::shared_ptr<io::stream_channel> out_;
  framing framing_;
  std::string ws_id_;
  std::vector<std::int64_t> text_offsets_;  // completions: bytes sent per choice, for text_offset
  int done_ = 0;
  schema::usage_counts usage_;
  bool failed_ = false;
};

/// Collects the whole response and delivers it as one JSON body.
class full_sink final : public stream_sink {
 public:
  full_sink(response_meta meta, std::shared_ptr<io::response_slot> slot, unsigned http_version);
  void on_token(const sched::token_event& e) override;
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  struct choice_state {
    std::string text;
    std::vector<schema::token_logprob> logprobs;
    std::string finish = "stop";
  };
  response_meta meta_;
  std::shared_ptr<io::response_slot> slot_;
  unsigned version_;
  std::vector<choice_state> choices_;
  int done_ = 0;
  schema::usage_counts usage_;
  bool failed_ = false;
};

/// The error a refused or failed choice becomes.
schema::api_error rejection_error(const sched::request_rejected& r);

}  // namespace strata::api
