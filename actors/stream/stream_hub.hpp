#pragma once
// stream_hub: the actor the scheduler replies to for every API request. It routes each
// request's events to that request's sink (an SSE stream, a pending JSON response, a WebSocket),
// which serializes them and sends them, as messages, to the connection's reply queue
// (io/reply_queue.hpp). The sinks run on the hub's strand, one at a time; each owns its state.
// Who sends to it: the API handlers (open_stream, before they submit) and the scheduler.

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <variant>
#include <vector>

#include "actors/runtime/actor.hpp"
#include "actors/scheduler/messages.hpp"

namespace strata::stream {

using sched::open_stream;
using sched::stream_sink;
using hub_inbox = sched::stream_inbox;
using hub_address = sched::stream_address;

class stream_hub final : public actors::actor<hub_inbox> {
 public:
  void receive(hub_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(open_stream o);
  void handle(sched::request_admitted a);
  void handle(sched::token_event e);
  void handle(sched::request_done d);
  void handle(sched::request_rejected r);

  std::size_t open_requests() const { return routes_.size(); }

 private:
  struct route {
    std::shared_ptr<stream_sink> sink;
    std::int32_t index = 0;
  };
  route* find(std::uint64_t id);

  std::unordered_map<std::uint64_t, route> routes_;
};

}  // namespace strata::stream
