#pragma once
// response_slot: a complete response that arrives later, from another thread (a non-streamed
// completion is answered when its last token is generated). The session owns the consuming side
// and waits on it; the producer sets the response once.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>

namespace strata::io {

class response_slot : public std::enable_shared_from_this<response_slot> {
 public:
  using response = boost::beast::http::response<boost::beast::http::string_body>;

  /// Create with std::make_shared; `consumer` is the connection's strand.
  explicit response_slot(boost::asio::any_io_executor consumer);

  /// Delivers the response (first call wins). Returns false when the consumer is gone.
  bool set(response r);
  /// The consumer is gone or gave up: on_cancel runs once; a later set() returns false.
  void cancel();
  void on_cancel(std::function<void()> fn);
  bool cancelled() const;

  /// Consumer: waits for the response; nullopt after `timeout` or when cancelled.
  boost::asio::awaitable<std::optional<response>> wait(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mu_;
  std::optional<response> value_;
  bool done_ = false;  // set() or cancel() happened
  bool cancelled_ = false;
  bool waiting_ = false;
  std::function<void()> cancel_fn_;
  boost::asio::steady_timer timer_;
};

}  // namespace strata::io
