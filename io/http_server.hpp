#pragma once
// http_server: accepts connections and runs one coroutine session per connection.
// Owns the acceptor and the registry of live sessions; start()/stop() from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "io/http_types.hpp"
#include "src/common/error.hpp"

namespace strata::io {

class http_session;

/// HTTP/1.1 with keep-alive, a body limit (413), header and idle timeouts, a connection limit
/// (503 past it) and graceful shutdown: stop() closes the listener and idle connections at once,
/// and lets connections in the middle of a request finish it before they close.
class http_server : public std::enable_shared_from_this<http_server> {
 public:
  http_server(boost::asio::io_context& ctx, http_options opts, request_handler handler);
  ~http_server();

  /// Binds and listens; an error names the address (port in use, bad host).
  result<void> start();
  /// Stops accepting and closes idle connections; busy ones close after their response.
  void stop();

  /// The bound port (useful with port 0).
  std::uint16_t port() const { return port_; }
  std::size_t connections() const { return live_.load(); }
  bool stopping() const { return stopping_.load(); }
  /// Blocks until no connection is open and, after stop(), the listener is closed too, or until
  /// `timeout` passes; returns whether that happened. Woken by each connection's end, not by
  /// polling: a graceful shutdown waits here for busy connections, a test for one to end.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  friend class http_session;
  void accept_loop_start();
  void on_session_end(std::uint64_t id);

  boost::asio::io_context& ctx_;
  http_options opts_;
  request_handler handler_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<std::size_t> live_{0};
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  /// Notified (under mu_) when a connection ends and when the listener closes.
  std::condition_variable idle_;
  bool listening_ = false;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::weak_ptr<http_session>> sessions_;
};

}  // namespace strata::io
