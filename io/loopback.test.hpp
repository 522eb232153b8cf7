#pragma once
// Test support for the io/ tests that talk to a real server: a server on a loopback port with its
// own threads, and a client that sends raw bytes and reads back the answer and whether the
// server then closed the connection. Every exchange has a deadline, so a server that neither
// answers nor closes fails the test instead of hanging it; what a test waits for (a cancel, a
// close) it waits for as an event with a deadline (one_shot, http_server::wait_idle), never by
// sleeping and looking again.

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "io/http_server.hpp"

namespace strata::io::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

/// Something that happens once, on any thread, and that a test waits for with a deadline instead
/// of polling for it: set() from a handler or a callback, wait_for() on the test's thread.
class one_shot {
 public:
  void set() {
    std::call_once(once_, [this] { promise_.set_value(); });
  }
  /// Whether it happened within `timeout` (at once, when it has already).
  bool wait_for(std::chrono::milliseconds timeout) const {
    return done_.wait_for(timeout) == std::future_status::ready;
  }

 private:
  std::once_flag once_;
  std::promise<void> promise_;
  std::shared_future<void> done_ = promise_.get_future().share();
};

/// A server on a loopback port, run by two threads until the object goes.
class loopback_server {
 public:
  loopback_server(http_options opts, request_handler handler) {
    opts.host = "127.0.0.1";
    opts.port = 0;
    server_ = std::make_shared<http_server>(ctx_, opts, std::move(handler));
    auto started = server_->start();
    EXPECT_TRUE(started) << (started ? "" : started.err().message);
    work_.emplace(ctx_.get_executor());
    // spdlog's registry is made on first use; made here, before the server threads log, its
    // construction happens-before their reads (the library is not built for ThreadSanitizer,
    // which cannot see the guard of its static).
    spdlog::default_logger_raw();
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ctx_.run(); });
  }
  ~loopback_server() {
    server_->stop();
    // Every connection's end wakes this; one that hangs is cut off with the context below.
    server_->wait_idle(5s);
    work_.reset();
    ctx_.stop();
    for (auto& t : threads_) t.join();
  }
  std::uint16_t port() const { return server_->port(); }
  http_server& server() { return *server_; }

 private:
  net::io_context ctx_;
  std::shared_ptr<http_server> server_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

/// A stream connected to the loopback server's port, with the 30 s deadline of a whole exchange.
inline beast::tcp_stream connect_loopback(net::io_context& ctx, std::uint16_t port) {
  beast::tcp_stream stream(ctx);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  stream.expires_after(30s);
  return stream;
}

/// What the server did with one raw request.
struct raw_reply {
  /// The response it sent; nothing when it closed the connection without one.
  std::optional<http::response<http::string_body>> res;
  /// It closed the connection after the response (or instead of one).
  bool closed = false;
};

/// Sends `raw` on a new connection, reads one response, then waits up to `close_wait` for the
/// server to close (not at all when zero). The whole exchange has 30 s.
inline raw_reply raw_exchange(std::uint16_t port, const std::string& raw,
                              std::chrono::milliseconds close_wait = std::chrono::seconds(5)) {
  net::io_context ctx;
  beast::tcp_stream stream = connect_loopback(ctx, port);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  raw_reply out;
  char byte = 0;
  // The write may fail once the server closes; only the answer matters.
  net::async_write(stream, net::buffer(raw), [](beast::error_code, std::size_t) {});
  http::async_read(stream, buffer, res, [&](beast::error_code ec, std::size_t) {
    if (ec) {
      out.closed = ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset;
      return;
    }
    out.res = std::move(res);
    if (buffer.size() > 0 || close_wait.count() == 0) return;  // more than one response: not closed
    stream.expires_after(close_wait);
    stream.async_read_some(net::buffer(&byte, 1), [&](beast::error_code ec2, std::size_t) {
      out.closed = ec2 == net::error::eof || ec2 == net::error::connection_reset;
    });
  });
  ctx.run();
  return out;
}

/// Sends each of `raws` in turn on one connection, reading one response after each: the
/// responses, fewer when the server closed the connection (or did not answer) first. A second
/// response shows that the connection outlived the first. The whole exchange has 30 s.
inline std::vector<http::response<http::string_body>> raw_in_turn(std::uint16_t port, const std::vector<std::string>& raws) {
  net::io_context ctx;
  beast::tcp_stream stream = connect_loopback(ctx, port);
  std::vector<http::response<http::string_body>> out;
  net::co_spawn(
      ctx,
      [&]() -> net::awaitable<void> {
        beast::flat_buffer buffer;
        for (const auto& raw : raws) {
          auto [write_error, n] = co_await net::async_write(stream, net::buffer(raw), net::as_tuple(net::use_awaitable));
          if (write_error) co_return;
          http::response<http::string_body> res;
          auto [read_error, m] = co_await http::async_read(stream, buffer, res, net::as_tuple(net::use_awaitable));
          if (read_error) co_return;
          out.push_back(std::move(res));
        }
      },
      net::detached);
  ctx.run();
  return out;
}

/// Everything the server sends in answer to `raw` until it closes the connection, and whether it
/// closed it within 30 s.
inline std::pair<std::string, bool> raw_until_close(std::uint16_t port, const std::string& raw) {
  net::io_context ctx;
  beast::tcp_stream stream = connect_loopback(ctx, port);
  std::string received;
  bool closed = false;
  net::async_write(stream, net::buffer(raw), [](beast::error_code, std::size_t) {});
  net::async_read(stream, net::dynamic_buffer(received), [&](beast::error_code ec, std::size_t) {
    closed = ec == net::error::eof || ec == net::error::connection_reset;
  });
  ctx.run();
  return {received, closed};
}

}  // namespace strata::io::testing
