#include "io/websocket_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include "io/cors.hpp"

namespace strata::io {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
constexpr auto nothrow = net::as_tuple(net::use_awaitable);

namespace {

using ws_stream = websocket::stream<beast::tcp_stream>;

/// Sends every outbox item as a text frame until the outbox is cancelled.
net::awaitable<void> write_loop(std::shared_ptr<ws_stream> ws, std::shared_ptr<stream_channel> outbox) {
  for (;;) {
    bool timed_out = false;
    auto item = co_await outbox->next(std::chrono::hours(24), timed_out);
    if (!item) {
      if (timed_out) continue;
      co_return;
    }
    ws->text(true);
    auto [ec, n] = co_await ws->async_write(net::buffer(*item), nothrow);
    if (ec) {
      outbox->cancel();
      co_return;
    }
  }
}

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

bool valid_websocket_key(std::string_view key) {
  // 16 bytes are 128 bits: 21 full characters and one with 2 bits (its low 4 bits zero), then "==".
  if (key.size() != 24 || !key.ends_with("==")) return false;
  for (std::size_t i = 0; i < 22; ++i) {
    if (!is_base64_char(key[i])) return false;
  }
  static constexpr std::string_view last_chars = "AQgw";  // the values 0, 16, 32 and 48
  return last_chars.find(key[21]) != std::string_view::npos;
}

std::optional<http_response> refuse_upgrade(const http_request& req, const std::vector<std::string>& allowed_origins) {
  // A refused handshake closes the connection: the client may already be sending frames.
  auto refuse = [](http_response res) {
    res.keep_alive(false);
    return res;
  };
  if (req.count(http::field::sec_websocket_key) != 1 || !valid_websocket_key(req[http::field::sec_websocket_key])) {
    return refuse(make_error(req.version(), http::status::bad_request,
                             "Sec-WebSocket-Key must be one header of 16 bytes in base64 (24 characters)",
                             "invalid_request_error", "bad_websocket_key"));
  }
  if (req.count(http::field::origin) > 0 && allowed_origin_of(req, allowed_origins).empty()) {
    return refuse(make_error(req.version(), http::status::forbidden,
                             "origin '" + std::string(req[http::field::origin]) +
                                 "' may not open this WebSocket; list it in server.cors_origins",
                             "invalid_request_error", "origin_not_allowed"));
  }
  return std::nullopt;
}

net::awaitable<void> run_websocket(beast::tcp_stream stream, http_request req, websocket_accept accept,
                                   std::string request_id) {
  auto executor = stream.get_executor();
  beast::get_lowest_layer(stream).expires_never();
  auto ws = std::make_shared<ws_stream>(std::move(stream));
  // Idle pings from the server and a timeout for peers that stop answering them.
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws->set_option(websocket::stream_base::decorator([request_id](websocket::response_type& res) {
    res.set(http::field::server, "strata");
    res.set("x-request-id", request_id);  // as on every response: it finds the socket's log line
  }));
  ws->read_message_max(accept.max_message);
  auto [ec] = co_await ws->async_accept(req, nothrow);
  if (ec) {
    spdlog::info("[{}] websocket handshake failed: {}", request_id, ec.message());
    co_return;
  }
  auto outbox = std::make_shared<stream_channel>(executor, 256, 64);
  net::co_spawn(executor, write_loop(ws, outbox), net::detached);

  beast::flat_buffer buffer;
  for (;;) {
    auto [rec, n] = co_await ws->async_read(buffer, nothrow);
    if (rec) {
      if (rec == websocket::error::message_too_big) {
        outbox->push(R"({"type":"error","id":null,"error":{"message":"message too large","type":"invalid_request_error","param":null,"code":"message_too_large"}})");
      }
      break;
    }
    if (!ws->got_text()) {
      outbox->push(R"({"type":"error","id":null,"error":{"message":"binary frames are not supported; send JSON text","type":"invalid_request_error","param":null,"code":"binary_frame"}})");
      buffer.consume(buffer.size());
      continue;
    }
    std::string message = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    try {
      accept.on_message(std::move(message), outbox);
    } catch (const std::exception& e) {
      spdlog::error("[{}] websocket handler failed: {}", request_id, e.what());
    }
  }
  outbox->cancel();
  if (accept.on_close) accept.on_close();
  beast::error_code ignored;
  beast::get_lowest_layer(*ws).socket().close(ignored);
}

}  // namespace strata::io
