#pragma once
// completions_service: the generating endpoints. It parses a request, renders the chat
// template, tokenizes, registers the request's sink with the stream hub and submits it to the
// scheduler; the sink turns the scheduler's events into SSE chunks, WebSocket frames or one
// JSON response.

#include <atomic>
#include <memory>

#include "io/http_types.hpp"
#include "src/api/generation_request.hpp"
#include "actors/stream/stream_hub.hpp"
#include "src/common/metrics.hpp"
#include "server/engine/engine.hpp"

namespace strata::api {

using sched::stream_sink;
using stream::hub_address;

class completions_service {
 public:
  completions_service(const engine::engine& e, hub_address hub);

  io::handler_result chat(io::http_request& req, const io::request_context& ctx);
  io::handler_result completion(io::http_request& req, const io::request_context& ctx);
  io::handler_result tokenize(io::http_request& req, const io::request_context& ctx);
  io::handler_result detokenize(io::http_request& req, const io::request_context& ctx);
  io::handler_result websocket(io::http_request& req, const io::request_context& ctx);

 private:
  io::handler_result generate(io::http_request& req, const io::request_context& ctx, bool chat);
  /// Prompt tokens and settings ready to submit, or an error. `key_salt`: the salt of the
  /// request's API key, mixed with the body's cache_salt.
  std::optional<api_error> prepare(generation_request& r, std::string_view key_salt);
  /// Registers `sink` and submits the request's n sequences; returns their scheduler ids.
  std::vector<std::uint64_t> submit(generation_request& r, std::unique_ptr<stream_sink> sink, std::vector<std::uint64_t> ids);
  std::vector<std::uint64_t> new_ids(int n);

  const engine::engine& engine_;
  hub_address hub_;
  std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace strata::api
