#pragma once
// actor_cell<Inbox>: one actor's mailbox, strand and behaviour, as the runtime sees it.

#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "actors/runtime/actor.hpp"
#include "actors/runtime/cell_base.hpp"
#include "actors/runtime/port.hpp"

namespace strata::actors {

// Declared here too: actor.hpp includes this header (through address.hpp) before it defines actor.
template <class Inbox>
class actor;

/// Mailbox protocol: tell() appends under a mutex and, if no drain is scheduled, posts one to the
/// actor's strand. A drain delivers up to `batch` messages, then reposts itself if more wait, so a
/// busy actor never starves the others on the pool. At most one drain is ever scheduled, hence
/// handlers of one actor never run concurrently and messages from one sender arrive in order.
///
/// Stop drains: messages already queued are delivered, later ones are refused (tell() returns
/// false); then on_stop() runs and the cell reports itself stopped.
template <class Inbox>
class actor_cell final : public cell_base,
                         public detail::cell_ports<actor_cell<Inbox>, Inbox>,
                         public std::enable_shared_from_this<actor_cell<Inbox>> {
 public:
  using factory_type = std::function<std::unique_ptr<actor<Inbox>>()>;

  actor_cell(std::string name, supervision policy, boost::asio::any_io_executor executor,
             std::size_t batch, failure_sink* sink, factory_type factory)
      : cell_base(std::move(name), policy, sink),
        strand_(boost::asio::make_strand(executor)),
        batch_(batch == 0 ? 1 : batch),
        factory_(std::move(factory)) {}

  /// Creates the behaviour; called once by the system right after construction.
  void start() { behaviour_ = make_behaviour(); }

  /// Appends msg. A `continuation` is the last act of a handler on this system's threads: its
  /// drain is deferred (boost::asio::defer) to run on the same thread once that handler returns,
  /// instead of being posted for another thread, which would be woken for it.
  bool enqueue(Inbox&& msg, bool continuation = false) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return false;
      queue_.push_back(std::move(msg));
      if (scheduled_) return true;
      scheduled_ = true;
    }
    schedule(continuation);
    return true;
  }

  bool accepting() const {
    std::lock_guard lock(mu_);
    return !closed_;
  }

  void close() override {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    if (!scheduled_) {
      scheduled_ = true;
      schedule();
    }
  }

  std::size_t queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  /// Queues a drain on the strand: deferred to this thread for a continuation, else posted.
  void schedule(bool continuation = false) {
    auto run = [self = this->shared_from_this()] { self->drain(); };
    if (continuation) {
      boost::asio::defer(strand_, std::move(run));
    } else {
      boost::asio::post(strand_, std::move(run));
    }
  }

  void drain() {
    {
      std::lock_guard lock(mu_);
      for (std::size_t i = 0; i < batch_ && !queue_.empty(); ++i) {
        draining_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (auto& msg : draining_) deliver(std::move(msg));
    draining_.clear();
    bool repost = false;
    bool finish = false;
    {
      std::lock_guard lock(mu_);
      if (!queue_.empty()) {
        repost = true;  // scheduled_ stays true: this drain hands its turn to the next one
      } else {
        scheduled_ = false;
        finish = closed_ && !stop_reported();
      }
    }
    if (repost) {
      schedule();
    } else if (finish) {
      run_on_stop();
    }
  }

  void deliver(Inbox&& msg) {
    if (!behaviour_) return;  // stopped after a failure: drop
    try {
      behaviour_->receive(std::move(msg));
    } catch (const std::exception& e) {
      on_failure(e.what());
    } catch (...) {
      on_failure("unknown exception");
    }
  }

  void on_failure(const std::string& what) {
    if (report_failure(what) == failure_action::restart) {
      behaviour_ = make_behaviour();
    } else {
      behaviour_.reset();
      std::lock_guard lock(mu_);
      closed_ = true;
    }
  }

  void run_on_stop() {
    if (behaviour_) {
      try {
        behaviour_->on_stop();
      } catch (const std::exception& e) {
        report_failure(e.what());
      }
    }
    behaviour_.reset();
    mark_stopped();
  }

  std::unique_ptr<actor<Inbox>> make_behaviour() {
    auto b = factory_();
    b->self_ = address<Inbox>(this->weak_from_this());
    b->name_ = name();
    b->executor_ = strand_;
    return b;
  }

  mutable std::mutex mu_;
  std::deque<Inbox> queue_;
  bool scheduled_ = false;
  bool closed_ = false;

  // Touched only inside drains (which never overlap).
  std::vector<Inbox> draining_;
  std::unique_ptr<actor<Inbox>> behaviour_;

  boost::asio::strand<boost::asio::any_io_executor> strand_;
  std::size_t batch_;
  factory_type factory_;
};

}  // namespace strata::actors
