#pragma once
// cell_base: the part of an actor cell the system handles without knowing its inbox type.

#include <atomic>
#include <string>

namespace strata::actors {

/// What the supervisor does when a handler throws.
enum class supervision {
  /// Replace the actor's state with a fresh instance; its address and mailbox stay.
  restart,
  /// Stop the actor and ask the whole system to stop.
  stop_system,
};

enum class failure_action { restart, stop };

class cell_base;

/// The supervisor side: told of every failure and of every stop.
class failure_sink {
 public:
  virtual ~failure_sink() = default;
  virtual failure_action on_actor_failure(cell_base& cell, const std::string& what) = 0;
  virtual void on_actor_stopped(cell_base& cell) = 0;
};

class cell_base {
 public:
  cell_base(std::string name, supervision policy, failure_sink* sink)
      : name_(std::move(name)), policy_(policy), sink_(sink) {}
  cell_base(const cell_base&) = delete;
  cell_base& operator=(const cell_base&) = delete;
  virtual ~cell_base() = default;

  /// Refuses new messages; queued ones are still delivered, then the actor stops.
  virtual void close() = 0;

  const std::string& name() const { return name_; }
  supervision policy() const { return policy_; }
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  int failures() const { return failures_.load(std::memory_order_relaxed); }

 protected:
  failure_action report_failure(const std::string& what) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return sink_ ? sink_->on_actor_failure(*this, what) : failure_action::stop;
  }
  bool stop_reported() const { return stopped(); }
  void mark_stopped() {
    stopped_.store(true, std::memory_order_release);
    if (sink_) sink_->on_actor_stopped(*this);
  }

 private:
  std::string name_;
  supervision policy_;
  failure_sink* sink_;
  std::atomic<bool> stopped_{false};
  std::atomic<int> failures_{0};
};

}  // namespace strata::actors
