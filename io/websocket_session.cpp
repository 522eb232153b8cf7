#include "io/websocket_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
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

namespace {

/// One upgraded connection: its stream, its outbox and the reader and writer loops, all on the
/// connection's strand.
class websocket_connection : public std::enable_shared_from_this<websocket_connection> {
 public:
  websocket_connection(std::shared_ptr<ws_stream> ws, websocket_accept accept, std::string request_id)
      : ws_(std::move(ws)),
        accept_(std::move(accept)),
        request_id_(std::move(request_id)),
        outbox_(reply_queue::create(ws_->get_executor(), accept_.outbox_high, accept_.outbox_low)),
        resume_(ws_->get_executor()),
        stall_(ws_->get_executor()) {
    outbox_->on_pressure([this](bool paused) { on_pressure(paused); });
  }

  net::awaitable<request_usage> run() {
    using namespace boost::asio::experimental::awaitable_operators;
    auto self = shared_from_this();
    co_await (read_loop() && write_loop());
    co_return usage_;
  }

 private:
  /// Hands each text message to the handler; stops reading while the outbox is full.
  net::awaitable<void> read_loop() {
    beast::flat_buffer buffer;
    for (;;) {
      while (outbox_->paused() && !closing_) {
        // The client reads too slowly: its own further requests wait in the network's buffers.
        resume_.expires_at(net::steady_timer::time_point::max());
        co_await resume_.async_wait(nothrow);
      }
      auto [rec, n] = co_await ws_->async_read(buffer, nothrow);
      if (rec) {
        if (rec == websocket::error::message_too_big) {
          outbox_->address().send({R"({"type":"error","id":null,"error":{"message":"message too large","type":"invalid_request_error","param":null,"code":"message_too_large"}})"});
        }
        break;
      }
      if (!ws_->got_text()) {
        outbox_->address().send({R"({"type":"error","id":null,"error":{"message":"binary frames are not supported; send JSON text","type":"invalid_request_error","param":null,"code":"binary_frame"}})"});
        buffer.consume(buffer.size());
        continue;
      }
      std::string text = beast::buffers_to_string(buffer.data());
      buffer.consume(buffer.size());
      try {
        accept_.on_message(websocket_message{std::move(text), outbox_->address()});
      } catch (const std::exception& e) {
        spdlog::error("[{}] websocket handler failed: {}", request_id_, e.what());
      }
    }
    outbox_->cancel();
    stall_.cancel();
    if (accept_.on_close) accept_.on_close();
  }

  /// Sends every outbox part as a text frame until the outbox ends or the socket fails.
  net::awaitable<void> write_loop() {
    for (;;) {
      bool timed_out = false;
      auto part = co_await outbox_->next(std::chrono::hours(24), timed_out);
      if (!part) {
        if (timed_out) continue;
        break;
      }
      usage_ += part->usage;
      if (!part->data.empty()) {
        ws_->text(true);
        auto [ec, n] = co_await ws_->async_write(net::buffer(part->data), nothrow);
        if (ec) break;
      }
      if (part->ended != 0 && accept_.on_ended) accept_.on_ended(part->ended);
      if (closing_) {
        // The client stalled past stall_timeout and has now taken a frame: tell it why it is closed.
        auto [ec] = co_await ws_->async_close(
            websocket::close_reason(websocket::close_code::try_again_later, "the client did not read its replies"), nothrow);
        break;
      }
    }
    outbox_->cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(*ws_).socket().close(ignored);  // ends the reader
  }

  void on_pressure(bool paused) {
    if (accept_.on_pressure) accept_.on_pressure(paused);
    if (!paused) {
      resume_.cancel();
      stall_.cancel();
      return;
    }
    stall_.expires_after(accept_.stall_timeout);
    stall_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || !self->outbox_->paused()) return;
      spdlog::warn("[{}] websocket: the client read nothing for {} ms with its outbox full; closing (1013)",
                   self->request_id_, self->accept_.stall_timeout.count());
      self->closing_ = true;
      self->resume_.cancel();
      // A frame the client never takes cannot carry the close reason: past a grace period the
      // connection is dropped.
      self->stall_.expires_after(std::chrono::seconds(5));
      self->stall_.async_wait([self](beast::error_code ec2) {
        if (ec2) return;
        beast::error_code ignored;
        beast::get_lowest_layer(*self->ws_).socket().close(ignored);
      });
    });
  }

  std::shared_ptr<ws_stream> ws_;
  websocket_accept accept_;
  std::string request_id_;
  std::shared_ptr<reply_queue> outbox_;
  net::steady_timer resume_;  // the reader waits on it while the outbox is full
  net::steady_timer stall_;   // how long the outbox has been full
  bool closing_ = false;
  request_usage usage_;
};

}  // namespace

net::awaitable<request_usage> run_websocket(beast::tcp_stream stream, http_request req, websocket_accept accept,
                                            std::string request_id) {
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
    co_return request_usage{};
  }
  auto connection = std::make_shared<websocket_connection>(std::move(ws), std::move(accept), std::move(request_id));
  co_return co_await connection->run();
}

}  // namespace strata::io
