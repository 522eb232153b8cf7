#pragma once
// upstream: the client side of HTTP, for `strata route`. One call sends a request to another
// server (a replica) on a connection of its own and reads the answer as it comes: the head first
// (a failure up to then means the request never started there, so the caller may send it
// elsewhere), then the body piece by piece, so a stream is passed on as each chunk arrives. Also
// the client's WebSocket handshake. Every call runs on the executor it was made with.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "io/http_types.hpp"

namespace strata::io {

struct upstream_address {
  std::string host;
  std::string port;
};

/// "http://host:port" (an optional trailing "/"; port 80 when none); empty when it is not one.
std::optional<upstream_address> parse_http_url(std::string_view url);

class upstream_call {
 public:
  explicit upstream_call(boost::asio::any_io_executor ex);

  /// Connects to `to` (within `connect_timeout`), writes `req` and reads the response's head
  /// (within `head_timeout`). An error here means nothing of the response was read.
  boost::asio::awaitable<boost::beast::error_code> start(const upstream_address& to, http_request req,
                                                         std::chrono::milliseconds connect_timeout,
                                                         std::chrono::milliseconds head_timeout);
  const http::response_header<>& head() const { return parser_.get().base(); }
  /// Whether the body comes in chunks (a stream) rather than with a length.
  bool chunked() const { return parser_.chunked(); }
  bool done() const { return parser_.is_done(); }
  /// Reads the next non-empty piece of the body into `out` (replacing what it held), waiting at
  /// most `idle` for bytes; `out` stays empty once the body has ended (done()).
  boost::asio::awaitable<boost::beast::error_code> read_some(std::string& out, std::chrono::milliseconds idle);
  /// Reads the whole rest of the body into `body`.
  boost::asio::awaitable<boost::beast::error_code> read_rest(std::string& body, std::chrono::milliseconds idle);
  /// Closes the connection: a read in progress ends with an error, and the server sees its client go.
  void close();

 private:
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
};

using websocket_client = boost::beast::websocket::stream<boost::beast::tcp_stream>;

/// Opens a WebSocket to `to` at `target` with the fields of `headers` copied onto the handshake
/// (an API key). Null with the error when the connection or the handshake failed.
boost::asio::awaitable<std::pair<boost::beast::error_code, std::shared_ptr<websocket_client>>> connect_websocket(
    boost::asio::any_io_executor ex, const upstream_address& to, std::string target, http::fields headers,
    std::chrono::milliseconds timeout);

}  // namespace strata::io
