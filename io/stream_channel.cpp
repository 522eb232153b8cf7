#include "io/stream_channel.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace strata::io {

namespace net = boost::asio;

stream_channel::stream_channel(net::any_io_executor consumer, std::size_t high_watermark, std::size_t low_watermark)
    : high_(high_watermark), low_(low_watermark), timer_(std::move(consumer)) {}

void stream_channel::wake_locked() {
  if (!waiting_) return;
  waiting_ = false;
  // The timer belongs to the consumer's strand: cancel it there.
  net::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
}

bool stream_channel::push(std::string data) {
  std::function<void(bool)> pressure;
  {
    std::lock_guard lock(mu_);
    if (cancelled_ || closed_) return false;
    items_.push_back(std::move(data));
    if (!paused_ && items_.size() >= high_) {
      paused_ = true;
      pressure = pressure_;
    }
    wake_locked();
  }
  if (pressure) pressure(true);
  return true;
}

void stream_channel::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  wake_locked();
}

void stream_channel::cancel() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    items_.clear();
    fn = std::move(cancel_fn_);
  }
  if (fn) fn();
}

net::awaitable<std::optional<std::string>> stream_channel::next(std::chrono::milliseconds timeout, bool& timed_out) {
  timed_out = false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::optional<std::string> item;
    std::function<void(bool)> resume;
    bool end = false;
    {
      std::lock_guard lock(mu_);
      if (!items_.empty()) {
        item = std::move(items_.front());
        items_.pop_front();
        if (paused_ && items_.size() <= low_) {
          paused_ = false;
          resume = pressure_;
        }
      } else if (closed_ || cancelled_) {
        end = true;
      } else if (std::chrono::steady_clock::now() >= deadline) {
        timed_out = true;
        end = true;
      } else {
        waiting_ = true;
        timer_.expires_at(deadline);
      }
    }
    if (item) {
      if (resume) resume(false);
      co_return item;
    }
    if (end) co_return std::nullopt;
    co_await timer_.async_wait(net::as_tuple(net::use_awaitable));
  }
}

void stream_channel::on_pressure(std::function<void(bool)> fn) {
  std::lock_guard lock(mu_);
  pressure_ = std::move(fn);
}

void stream_channel::on_cancel(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  cancel_fn_ = std::move(fn);
}

std::size_t stream_channel::queued() const {
  std::lock_guard lock(mu_);
  return items_.size();
}

bool stream_channel::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

}  // namespace strata::io
