#pragma once
// reply_queue: the mailbox of one connection for the replies it writes, and reply_address, the
// handle producers send to. The queue lives on the connection's strand and only that strand
// touches it: sending posts the part there, as a message, and nothing is shared but the handle
// (which, like an actor's address, never keeps the queue alive). Pause and cancel travel back to
// the producer as messages too: the owner of the queue installs what to send (on_pressure,
// on_cancel), and those run on the strand.
//
// Backpressure: past `high` queued parts the queue calls on_pressure(true) once (the owner pauses
// the request's sequences at the scheduler); when the writer has drained it to `low`, it calls
// on_pressure(false). A slow reader therefore slows its own replies and nothing else.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace strata::io {

/// The tokens a request used, for its access-log line.
struct request_usage {
  std::int64_t prompt_tokens = 0;
  /// Of the prompt tokens, those reused from the prefix cache.
  std::int64_t cached_tokens = 0;
  std::int64_t generated_tokens = 0;
  /// The name of the API key the request came with (empty: none); not summed.
  std::string key_name;

  request_usage& operator+=(const request_usage& o) {
    prompt_tokens += o.prompt_tokens;
    cached_tokens += o.cached_tokens;
    generated_tokens += o.generated_tokens;
    return *this;
  }
};

/// One piece of a reply, moved from its producer to the connection.
struct reply_part {
  /// Bytes for the client: a piece of a streamed body, one WebSocket text frame, or (with
  /// `status`) a whole JSON body.
  std::string data;
  /// Non-zero: the part is a whole response with this HTTP status instead of a piece of a stream
  /// (a non-streamed answer, or a request refused before its stream began).
  int status = 0;
  /// The last part of the request whose first scheduler id this is (WebSocket bookkeeping).
  std::uint64_t ended = 0;
  /// What the request used, carried by its last part.
  request_usage usage;
  /// The producer failed in the middle of a stream (a proxied replica died): the connection is
  /// dropped without ending the body, so the client sees its stream cut, not complete.
  bool abort = false;
};

class reply_queue;

/// Where a producer sends a connection's reply parts. Copyable; safe from any thread.
class reply_address {
 public:
  reply_address() = default;
  /// Posts `part` to the connection's strand. False when the connection is gone (then the part is
  /// dropped).
  bool send(reply_part part) const;
  /// No more parts: the connection ends its reply after the queued ones.
  void close() const;
  bool empty() const noexcept { return queue_.expired(); }

 private:
  friend class reply_queue;
  reply_address(boost::asio::any_io_executor strand, std::weak_ptr<reply_queue> queue)
      : strand_(std::move(strand)), queue_(std::move(queue)) {}
  boost::asio::any_io_executor strand_;
  std::weak_ptr<reply_queue> queue_;
};

class reply_queue : public std::enable_shared_from_this<reply_queue> {
 public:
  /// `strand` is the connection's strand: every member below runs there.
  static std::shared_ptr<reply_queue> create(boost::asio::any_io_executor strand, std::size_t high = 64, std::size_t low = 16);

  reply_address address();

  /// The next part; nullopt at the end (closed or cancelled), or after `timeout` with `timed_out`
  /// set (keep-alive comments during a long prefill).
  boost::asio::awaitable<std::optional<reply_part>> next(std::chrono::milliseconds timeout, bool& timed_out);
  /// The consumer is gone: later parts are dropped and on_cancel runs (once).
  void cancel();

  void on_pressure(std::function<void(bool paused)> fn) { pressure_ = std::move(fn); }
  void on_cancel(std::function<void()> fn) { cancel_fn_ = std::move(fn); }
  std::size_t queued() const { return items_.size(); }
  bool paused() const { return paused_; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class reply_address;
  reply_queue(boost::asio::any_io_executor strand, std::size_t high, std::size_t low);
  void deliver(reply_part part);
  void end();

  std::deque<reply_part> items_;
  bool closed_ = false;
  bool cancelled_ = false;
  bool paused_ = false;
  std::size_t high_;
  std::size_t low_;
  std::function<void(bool)> pressure_;
  std::function<void()> cancel_fn_;
  boost::asio::steady_timer timer_;  // next() waits on it; a delivery cancels it
};

}  // namespace strata::io
