#include "io/response_slot.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace strata::io {

namespace net = boost::asio;

response_slot::response_slot(net::any_io_executor consumer) : timer_(std::move(consumer)) {}

bool response_slot::set(response r) {
  std::lock_guard lock(mu_);
  if (done_) return false;
  done_ = true;
  value_ = std::move(r);
  if (waiting_) {
    waiting_ = false;
    net::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
  }
  return true;
}

void response_slot::cancel() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    done_ = true;
    value_.reset();
    fn = std::move(cancel_fn_);
  }
  if (fn) fn();
}

void response_slot::on_cancel(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  cancel_fn_ = std::move(fn);
}

bool response_slot::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

net::awaitable<std::optional<response_slot::response>> response_slot::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (value_) {
        std::optional<response> out = std::move(value_);
        value_.reset();
        co_return out;
      }
      if (cancelled_ || std::chrono::steady_clock::now() >= deadline) co_return std::nullopt;
      waiting_ = true;
      timer_.expires_at(deadline);
    }
    co_await timer_.async_wait(net::as_tuple(net::use_awaitable));
  }
}

}  // namespace strata::io
