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
#include <boost/asio/awaitable.hpp>
#include <string>

#include <boost/beast/http.hpp>

#include "io/reply_queue.hpp"

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

/// What a handler learns about the request beyond the message itself.
struct request_context {
  std::string request_id;
  std::string remote;
  /// The connection's strand: a reply_queue for this request lives there.
  boost::asio::any_io_executor executor;
  /// The salt of the API key the request came with (empty: none), which keeps its requests'
  /// prefix cache apart from other keys'.
  std::string key_salt;
  /// Where the router writes the name of the request's API key, for its access-log line (the
  /// session's own record, on the connection's strand; null when nobody logs it).
  std::string* key_name = nullptr;
};

/// A response whose body is a stream. The queue's first part decides it: a part with a status is
/// a whole response instead (the request was refused before its stream began: 429 when the
/// scheduler's queue is full), written with that status and nothing else; otherwise `head`
/// (status and headers) goes first, then that part and every later one as a chunk (chunked
/// transfer encoding), until the queue ends. While nothing arrives for `keepalive` after the head,
/// `keepalive_data` is written (an SSE comment line) so proxies and clients keep the connection
/// through a long prefill.
struct stream_reply {
  http_response head;
  std::shared_ptr<reply_queue> queue;
  std::chrono::milliseconds keepalive{5000};
  std::string keepalive_data = ": keep-alive\n\n";
};

/// What a WebSocket's handler is given for each text message the client sends, on the
/// connection's strand.
struct websocket_message {
  std::string text;
  /// The socket's outbox: every part sent there becomes one text frame, in order.
  reply_address outbox;
};

/// Accept the request as a WebSocket upgrade. The socket has one outbox (a bounded reply_queue):
/// past its high watermark on_pressure(true) runs (the handler pauses the socket's streams) and
/// the server stops reading the client's messages until it has drained; if it stays that full for
/// `stall_timeout`, the socket is closed with 1013 (try again later) and a reason. Every callback
/// runs on the connection's strand.
struct websocket_accept {
  std::function<void(websocket_message message)> on_message;
  /// A request's last part was written (reply_part::ended).
  std::function<void(std::uint64_t ended)> on_ended;
  std::function<void(bool paused)> on_pressure;
  /// Called once when the socket has closed.
  std::function<void()> on_close;
  std::size_t max_message = 1 << 20;
  std::size_t outbox_high = 256;
  std::size_t outbox_low = 64;
  std::chrono::milliseconds stall_timeout{30'000};
};

/// A complete response that comes later (a non-streamed completion): the session waits for the
/// queue's one part (its status and JSON body) for up to `timeout`, then answers 504; if the client
/// goes away meanwhile the queue is cancelled.
struct deferred_reply {
  std::shared_ptr<reply_queue> queue;
  std::chrono::milliseconds timeout{600'000};
};

struct async_reply;

using handler_result = std::variant<http_response, stream_reply, websocket_accept, deferred_reply, async_reply>;

/// A reply that needs work too slow for the connection's thread first (rendering a chat template,
/// tokenizing a long prompt): the session awaits `run`, which does that work elsewhere and resumes
/// on the connection's strand, then answers with the result as if the handler had returned it
/// (never a websocket_accept).
struct async_reply {
  std::function<boost::asio::awaitable<handler_result>()> run;
};

/// Turns one complete request into a response. Runs on the connection's strand: must not block.
using request_handler = std::function<handler_result(http_request&, const request_context&)>;

/// An OpenAI-shaped error body: {"error":{"message","type","param","code"}}.
http_response make_error(unsigned version, http::status status, std::string_view message,
                         std::string_view type, std::string_view code = {}, std::string_view param = {});

/// A JSON response with the given body.
http_response make_json(unsigned version, http::status status, std::string body);

}  // namespace strata::io
