#pragma once
// sse_reply: the head of a streamed answer (200, text/event-stream) on a request's reply queue.

#include <memory>
#include <utility>

#include "io/http_types.hpp"

namespace strata::api {

inline io::stream_reply sse_reply(unsigned version, std::shared_ptr<io::reply_queue> queue) {
  io::stream_reply reply;
  reply.head = io::http_response{io::http::status::ok, version};
  reply.head.set(io::http::field::content_type, "text/event-stream");
  reply.head.set(io::http::field::cache_control, "no-cache");
  reply.queue = std::move(queue);
  return reply;
}

}  // namespace strata::api
