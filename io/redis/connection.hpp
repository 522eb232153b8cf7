#pragma once
// connection: one connection to one Redis server, driven by an Asio executor. hiredis's async
// context does the protocol; its socket is watched through an asio::posix::stream_descriptor that
// does not own it (hiredis closes it), so no thread ever blocks on Redis. Every command has a
// deadline: past it, the command fails with a timeout and the connection is closed (a server that
// stopped answering is treated as gone; the cluster client opens a new one on its next command).
//
// All calls, and every callback, run on the executor given at open(): it must be a strand (an
// actor's own executor is one).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "io/redis/reply.hpp"
#include "src/common/error.hpp"

struct redisAsyncContext;  // hiredis

namespace strata::redis {

/// A command's outcome: the reply (an error reply included), or why none came (timeout, closed).
using callback = std::function<void(result<reply>)>;

class connection : public std::enable_shared_from_this<connection> {
 public:
  /// Starts connecting to host:port (an IP address or a name); commands may be sent at once.
  static std::shared_ptr<connection> open(boost::asio::any_io_executor ex, std::string host, int port,
                                          std::chrono::milliseconds timeout);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Sends argv; cb gets the reply. Commands on one connection are answered in order.
  void command(std::vector<std::string> argv, callback cb);
  /// Closes the connection: pending commands fail. Idempotent.
  void close();
  /// False once the connection failed or was closed.
  bool usable() const { return ctx_ != nullptr; }
  const std::string& name() const { return name_; }

 private:
  struct watcher;
  struct pending;
  connection(boost::asio::any_io_executor ex, std::string name, std::chrono::milliseconds timeout);
  static void on_reply(::redisAsyncContext* ac, void* r, void* privdata);
  static void on_cleanup(void* privdata);
  void arm(bool write);

  boost::asio::any_io_executor ex_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  ::redisAsyncContext* ctx_ = nullptr;
  std::unique_ptr<watcher> watch_;
};

}  // namespace strata::redis
