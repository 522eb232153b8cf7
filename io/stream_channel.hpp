#pragma once
// stream_channel: the bounded queue between whoever produces a response stream (the scheduler's
// token events, already serialized) and the connection that writes it. The session owns the
// consuming side; producers only push.
//
// Backpressure: past `high_watermark` queued items the channel calls on_pressure(true) once (the
// producer pauses the sequence); when the writer has drained it to `low_watermark` it calls
// on_pressure(false). A slow reader therefore slows its own stream and nothing else, and the
// queue never grows without bound as long as the producer honours the signal.

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace strata::io {

class stream_channel : public std::enable_shared_from_this<stream_channel> {
 public:
  /// Create with std::make_shared: wake-ups hold a reference while they are in flight.
  stream_channel(boost::asio::any_io_executor consumer, std::size_t high_watermark = 64,
                 std::size_t low_watermark = 16);

  /// Queues one serialized event. Returns false when the consumer is gone (client disconnected),
  /// so the producer can stop generating.
  bool push(std::string data);
  /// The producer is done: the consumer sees the end after the queued items.
  void close();
  /// The consumer is gone: later pushes return false and on_cancel runs (once).
  void cancel();

  /// Consumer: the next item; nullopt at the end of the stream, or after `timeout` with
  /// `timed_out` set (used for keep-alive comments during a long prefill).
  boost::asio::awaitable<std::optional<std::string>> next(std::chrono::milliseconds timeout, bool& timed_out);

  void on_pressure(std::function<void(bool paused)> fn);
  void on_cancel(std::function<void()> fn);
  std::size_t queued() const;
  bool cancelled() const;

 private:
  void wake_locked();

  mutable std::mutex mu_;
  std::deque<std::string> items_;
  bool closed_ = false;
  bool cancelled_ = false;
  bool paused_ = false;
  bool waiting_ = false;
  std::size_t high_;
  std::size_t low_;
  std::function<void(bool)> pressure_;
  std::function<void()> cancel_fn_;
  boost::asio::steady_timer timer_;  // the consumer waits on it; producers cancel it to wake it
};

}  // namespace strata::io
