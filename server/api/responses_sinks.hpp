#pragma once
// The sinks of POST /v1/responses: the scheduler's events become the response object or its
// stream of events (src/api/responses_writer.hpp). The output is read into blocks as the Messages
// API reads it (block_reader): text becomes a message item, reasoning a reasoning item, each call a
// function_call item. A stored response (store, the default) goes to the response store when done.

#include <cstdint>
#include <memory>
#include <optional>

#include <boost/json/array.hpp>

#include "actors/stream/stream_hub.hpp"
#include "io/reply_queue.hpp"
#include "server/api/block_reader.hpp"
#include "server/api/response_store.hpp"
#include "src/api/responses_writer.hpp"

namespace strata::api {

struct response_context {
  /// The response as begun: id, created_at, model, the request's echoed members, input tokens.
  schema::response_state state;
  std::uint64_t id = 0;
  std::optional<chat::parser_options> output;
  /// Where to keep it (null: store false), with the conversation so far (no instructions).
  std::shared_ptr<response_store> store;
  boost::json::array conversation;
};

/// The items of the blocks read so far; item ids derive from the response id.
schema::response_item item_of(const schema::response_state& r, const schema::content_block& b, int index);

class response_stream_sink final : public sched::stream_sink {
 public:
  response_stream_sink(response_context ctx, io::reply_address out);
  void on_admitted(const sched::request_admitted& a) override;
  void on_token(const sched::token_event& e) override;
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  void send(std::string event) { out_.send({std::move(event)}); }
  /// Sends what the reader read since the last call as item events (`at_end`: and the last
  /// item's done).
  void flush(bool at_end = false);

  response_context ctx_;
  io::reply_address out_;
  block_reader reader_;
  schema::response_events events_;
  bool admitted_ = false;
  bool failed_ = false;
};

class response_full_sink final : public sched::stream_sink {
 public:
  response_full_sink(response_context ctx, io::reply_address out);
  void on_admitted(const sched::request_admitted&) override {}
  void on_token(const sched::token_event& e) override { reader_.feed(e.text); }
  void on_done(const sched::request_done& d) override;
  void on_rejected(const sched::request_rejected& r) override;

 private:
  response_context ctx_;
  io::reply_address out_;
  block_reader reader_;
  bool failed_ = false;
};

}  // namespace strata::api
