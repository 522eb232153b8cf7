#pragma once
// actor_system: the shared thread pool, the actors' registry and the root supervisor.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "actors/runtime/actor_cell.hpp"

namespace strata::actors {

/// One failure as the supervisor saw it.
struct failure_report {
  std::string actor;
  std::string what;
  supervision policy;
  bool restarted;
};

/// Runs actors on one io_context served by `threads` threads (default: one per core). Network
/// sessions and timers share the same context, so nothing blocks a thread.
///
/// Supervision: an exception escaping a handler is logged with the actor's name and handled by
/// the actor's policy: `restart` swaps in a fresh instance (at most `max_restarts` within
/// `restart_window`, then it escalates to stop-the-system), `stop_system` stops the actor and
/// requests that the whole system stop.
///
/// Manual mode (threads = 0) runs nothing by itself: a test calls run_one() to deliver exactly
/// one message at a time, deterministically, on its own thread (run_all(), run_until() and
/// run_one_for() step the same way).
class actor_system final : private failure_sink {
 public:
  struct options {
    /// Worker threads; -1 means one per core, 0 means manual mode.
    int threads = -1;
    /// Messages one drain delivers before yielding the thread (1 in manual mode).
    std::size_t batch = 64;
    int max_restarts = 5;
    std::chrono::milliseconds restart_window{10'000};
  };

  actor_system();
  explicit actor_system(options opts);
  actor_system(const actor_system&) = delete;
  actor_system& operator=(const actor_system&) = delete;
  /// Stops (draining every mailbox) and joins.
  ~actor_system() override;

  /// Creates actor A (constructed from args, re-constructed from them on restart).
  template <class A, class... Args>
  address<typename A::inbox_type> spawn(std::string name, supervision policy, Args... args) {
    using inbox_t = typename A::inbox_type;
    static_assert(inbox<inbox_t>, "an actor's inbox must be a std::variant of message types");
    auto factory = [args...]() -> std::unique_ptr<actor<inbox_t>> { return std::make_unique<A>(args...); };
    return spawn_cell<inbox_t>(std::move(name), policy, std::move(factory));
  }

  /// Creates actor A from args moved into it, for an actor that becomes the only owner of what
  /// it is given (a unique_ptr to a resource no other thread touches). Such state cannot be
  /// rebuilt, so the policy is stop_system: a failure stops the system, never restarts A. A is
  /// constructed before this returns, on the calling thread.
  template <class A, class... Args>
  address<typename A::inbox_type> spawn_owning(std::string name, Args&&... args) {
    using inbox_t = typename A::inbox_type;
    static_assert(inbox<inbox_t>, "an actor's inbox must be a std::variant of message types");
    // The factory must be copyable (std::function); the arguments are moved out of the one shared
    // copy at the single construction.
    auto held = std::make_shared<std::tuple<std::decay_t<Args>...>>(std::forward<Args>(args)...);
    auto factory = [held]() -> std::unique_ptr<actor<inbox_t>> {
      return std::apply([](auto&... a) { return std::make_unique<A>(std::move(a)...); }, *held);
    };
    return spawn_cell<inbox_t>(std::move(name), supervision::stop_system, std::move(factory));
  }

  /// The shared io_context, for sockets, timers and signal sets.
  boost::asio::io_context& context() { return ctx_; }

  /// Called for every failure (after logging); a test or a metrics exporter hooks in here.
  void on_failure(std::function<void(const failure_report&)> hook);

  /// Asks the system to stop; returns at once (safe from inside a handler).
  void request_stop();
  bool stop_requested() const;
  /// Blocks until request_stop() was called (or the timeout passes); returns whether it was.
  bool wait_for_stop_request(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  /// Closes every actor (queued messages are delivered, new ones refused), waits up to `grace`
  /// for them to drain, then stops the context and joins the threads. Idempotent. Must not be
  /// called from a handler.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds{5000});

  /// Manual mode: runs one ready handler (one message). Returns false if none was ready.
  bool run_one();
  /// Manual mode: runs handlers until none is ready; returns how many ran.
  std::size_t run_all();
  /// Manual mode: runs handlers one at a time until `done()` holds (checked before each) or none
  /// is ready; returns how many ran. A test steps to a state ("the first step is in layer 1")
  /// without counting messages.
  std::size_t run_until(const std::function<bool()>& done);
  /// Manual mode: runs one handler, waiting up to `timeout` for one to become ready: for an actor
  /// that waits on real I/O (a socket, an io_uring eventfd), whose completion arrives from outside
  /// the system. Returns false if none ran in time.
  bool run_one_for(std::chrono::milliseconds timeout);
  /// Manual mode: runs handlers until `done()` holds; when none is ready, waits for the next event
  /// from outside (as run_one_for); for at most `timeout` in all, busy or waiting. Returns whether
  /// done() holds: a test of an actor on real I/O steps to an outcome without sleeping and without
  /// hanging.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

  std::size_t thread_count() const { return threads_.size(); }
  std::size_t actor_count() const;
  std::size_t stopped_count() const;

 private:
  template <class Inbox>
  address<Inbox> spawn_cell(std::string name, supervision policy, typename actor_cell<Inbox>::factory_type factory) {
    auto cell = std::make_shared<actor_cell<Inbox>>(std::move(name), policy, ctx_.get_executor(), batch_,
                                                    static_cast<failure_sink*>(this), std::move(factory));
    cell->start();
    register_cell(cell);
    return address<Inbox>(cell);
  }

  /// A worker thread's loop: runs the context until it stops. An exception that escapes a
  /// completion handler outside every actor (a connection's write, say) is logged and the thread
  /// goes on serving: one bad event never ends the process.
  void serve();

  failure_action on_actor_failure(cell_base& cell, const std::string& what) override;
  void on_actor_stopped(cell_base& cell) override;
  void register_cell(std::shared_ptr<cell_base> cell);

  boost::asio::io_context ctx_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::size_t batch_;
  bool manual_;
  int max_restarts_;
  std::chrono::milliseconds restart_window_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<cell_base>> cells_;
  std::vector<std::chrono::steady_clock::time_point> restarts_;  // recent restarts, any actor
  std::function<void(const failure_report&)> hook_;
  std::size_t stopped_ = 0;
  bool stop_requested_ = false;
  bool stopped_system_ = false;
};

}  // namespace strata::actors
