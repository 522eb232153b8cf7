#pragma once
// The HTTP vocabulary shared by the server, its sessions and the API's handlers.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <string>

#include <boost/beast/http.hpp>

#include "io/response_slot.hpp"
#include "io/stream_channel.hpp"

namespace strata::io {

namespace http = boost::beast::http;
using http_request = http::request<http::string_body>;
using http_response = http::response<http::string_body>;

struct http_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  /// Decoded body bytes plus every chunk extension and trailer field (413 past it).
  std::uint64_t max_body = 8ull << 20;
  /// The request line and header fields (431 past it); apart from them, the trailer section (431)
  /// and any one chunk-size line (413). Past 64 KiB one field outgrows Beast's fields container.
  std::uint32_t max_header = 16 * 1024;
  int max_connections = 10'000;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{30'000};
  /// Origins whose web pages may use the API (CORS) and open WebSockets, such as
  /// "https://app.example"; "*" admits any. Empty: no CORS headers, and a WebSocket handshake
  /// that carries an Origin is refused (403). Requests without an Origin are not affected.
  std::vector<std::string> cors_origins;
  /// Called with the status of every response the server sends (101 for a WebSocket upgrade),
  /// from the connection's thread: counts responses by status for the metrics.
  std::function<void(int status)> on_response;
};

/// The tokens a request used, for its access-log line: the handler's sinks add what the
/// response's usage reports when it is complete, from whichever thread finishes it, and the session
/// reads the totals once the response is written. A WebSocket's requests all add to the one record
/// of its upgrade request.
struct request_usage {
  std::atomic<std::int64_t> prompt_tokens{0};
  /// Of the prompt tokens, those reused from the prefix cache.
  std::atomic<std::int64_t> cached_tokens{0};
  std::atomic<std::int64_t> generated_tokens{0};
};

/// What a handler learns about the request beyond the message itself.
struct request_context {
  std::string request_id;
  std::string remote;
  /// The connection's strand: a stream_channel for this request is consumed there.
  boost::asio::any_io_executor executor;
  /// Where the handler reports the request's tokens (null when nobody logs them).
  std::shared_ptr<request_usage> usage;
};

/// A response whose body is a stream: `head` (status and headers) goes first, then every item
/// the channel yields as one chunk (chunked transfer encoding), until the channel ends. While
/// nothing arrives for `keepalive`, `keepalive_data` is written (an SSE comment line) so proxies
/// and clients keep the connection through a long prefill.
struct stream_reply {
  http_response head;
  std::shared_ptr<stream_channel> channel;
  std::chrono::milliseconds keepalive{5000};
  std::string keepalive_data = ": keep-alive\n\n";
};

/// Accept the request as a WebSocket upgrade. For each text message the client sends,
/// `on_message` runs on the connection's strand with the connection's outbox: every item pushed
/// there becomes one text frame, in order. The outbox is one bounded stream_channel per socket,
/// so its watermarks give per-socket backpressure; it is cancelled when the socket closes.
struct websocket_accept {
  std::function<void(std::string message, const std::shared_ptr<stream_channel>& outbox)> on_message;
  /// Called once when the socket has closed (after the outbox was cancelled).
  std::function<void()> on_close;
  std::size_t max_message = 1 << 20;
};

/// A complete response that another thread delivers later (a non-streamed completion): the
/// session waits on the slot for up to `timeout`, then answers 504; if the client goes away
/// meanwhile the slot is cancelled at the next write.
struct deferred_reply {
  std::shared_ptr<response_slot> slot;
  std::chrono::milliseconds timeout{600'000};
};

using handler_result = std::variant<http_response, stream_reply, websocket_accept, deferred_reply>;

/// Turns one complete request into a response. Runs on the connection's strand: must not block.
using request_handler = std::function<handler_result(http_request&, const request_context&)>;

/// An OpenAI-shaped error body: {"error":{"message","type","param","code"}}.
http_response make_error(unsigned version, http::status status, std::string_view message,
                         std::string_view type, std::string_view code = {}, std::string_view param = {});

/// A JSON response with the given body.
http_response make_json(unsigned version, http::status status, std::string body);

}  // namespace strata::io
