#include "io/reply_queue.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace strata::io {

namespace net = boost::asio;

bool reply_address::send(reply_part part) const {
  if (queue_.expired()) return false;
  net::post(strand_, [q = queue_, part = std::move(part)]() mutable {
    if (auto queue = q.lock()) queue->deliver(std::move(part));
  });
  return true;
}

void reply_address::close() const {
  if (queue_.expired()) return;
  net::post(strand_, [q = queue_] {
    if (auto queue = q.lock()) queue->end();
  });
}

std::shared_ptr<reply_queue> reply_queue::create(net::any_io_executor strand, std::size_t high, std::size_t low) {
  return std::shared_ptr<reply_queue>(new reply_queue(std::move(strand), high, low));
}

reply_queue::reply_queue(net::any_io_executor strand, std::size_t high, std::size_t low)
    : high_(high), low_(low), timer_(std::move(strand)) {}

reply_address reply_queue::address() { return reply_address(timer_.get_executor(), weak_from_this()); }

void reply_queue::deliver(reply_part part) {
  if (cancelled_ || closed_) return;
  items_.push_back(std::move(part));
  timer_.cancel();
  if (!paused_ && items_.size() >= high_) {
    paused_ = true;
    if (pressure_) pressure_(true);
  }
}

void reply_queue::end() {
  closed_ = true;
  timer_.cancel();
}

void reply_queue::cancel() {
  if (cancelled_) return;
  cancelled_ = true;
  items_.clear();
  timer_.cancel();
  if (auto fn = std::move(cancel_fn_)) fn();
}

net::awaitable<std::optional<reply_part>> reply_queue::next(std::chrono::milliseconds timeout, bool& timed_out) {
  timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Keeps the queue alive across the wait, should its owner let go meanwhile.
  auto self = shared_from_this();
  for (;;) {
    if (!items_.empty()) {
      reply_part part = std::move(items_.front());
      items_.pop_front();
      if (paused_ && items_.size() <= low_) {
        paused_ = false;
        if (pressure_) pressure_(false);
      }
      co_return part;
    }
    if (closed_ || cancelled_) co_return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      co_return std::nullopt;
    }
    timer_.expires_at(deadline);
    co_await timer_.async_wait(net::as_tuple(net::use_awaitable));
  }
}

}  // namespace strata::io
