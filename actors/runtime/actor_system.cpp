#include "actors/runtime/actor_system.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace strata::actors {

actor_system::actor_system() : actor_system(options{}) {}

namespace {

/// The worker threads for options::threads: -1 is one per core; 0 (manual mode) runs none.
int worker_threads(int threads) { return threads < 0 ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) : threads; }

}  // namespace

// The io_context is told how many threads run it. With a hint of 1 Asio takes it to be run by one
// thread: what a handler posts stays in that thread's private queue, and no other thread is woken
// for it, so a reply posted by the scheduler waited behind the next step's layers on that thread
// (up to a second: a step saving 2 GB of KV). Manual mode runs on the test's one thread.
actor_system::actor_system(options opts)
    : ctx_(std::max(1, worker_threads(opts.threads))),
      batch_(opts.threads == 0 ? 1 : opts.batch),
      manual_(opts.threads == 0),
      max_restarts_(opts.max_restarts),
      restart_window_(opts.restart_window) {
  work_.emplace(ctx_.get_executor());
  if (manual_) return;
  const int n = worker_threads(opts.threads);
  threads_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] { serve(); });
  }
}

void actor_system::serve() {
  for (;;) {
    try {
      ctx_.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("an event handler threw: {}; the thread goes on", e.what());
    } catch (...) {
      spdlog::error("an event handler threw a non-standard exception; the thread goes on");
    }
  }
}

actor_system::~actor_system() { stop(); }

void actor_system::on_failure(std::function<void(const failure_report&)> hook) {
  std::lock_guard lock(mu_);
  hook_ = std::move(hook);
}

void actor_system::request_stop() {
  {
    std::lock_guard lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

bool actor_system::stop_requested() const {
  std::lock_guard lock(mu_);
  return stop_requested_;
}

bool actor_system::wait_for_stop_request(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mu_);
  if (timeout) return cv_.wait_for(lock, *timeout, [this] { return stop_requested_; });
  cv_.wait(lock, [this] { return stop_requested_; });
  return true;
}

void actor_system::register_cell(std::shared_ptr<cell_base> cell) {
  std::lock_guard lock(mu_);
  cells_.push_back(std::move(cell));
}

std::size_t actor_system::actor_count() const {
  std::lock_guard lock(mu_);
  return cells_.size();
}

std::size_t actor_system::stopped_count() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

failure_action actor_system::on_actor_failure(cell_base& cell, const std::string& what) {
  bool restart = cell.policy() == supervision::restart;
  std::function<void(const failure_report&)> hook;
  {
    std::lock_guard lock(mu_);
    if (restart) {
      auto now = std::chrono::steady_clock::now();
      std::erase_if(restarts_, [&](auto t) { return now - t > restart_window_; });
      restarts_.push_back(now);
      restart = static_cast<int>(restarts_.size()) <= max_restarts_;
    }
    hook = hook_;
  }
  if (restart) {
    spdlog::error("actor '{}' failed: {}; restarting it", cell.name(), what);
  } else {
    spdlog::error("actor '{}' failed: {}; stopping the system", cell.name(), what);
    request_stop();
  }
  if (hook) hook(failure_report{cell.name(), what, cell.policy(), restart});
  return restart ? failure_action::restart : failure_action::stop;
}

void actor_system::on_actor_stopped(cell_base&) {
  {
    std::lock_guard lock(mu_);
    ++stopped_;
  }
  cv_.notify_all();
}

void actor_system::stop(std::chrono::milliseconds grace) {
  std::vector<std::shared_ptr<cell_base>> cells;
  {
    std::lock_guard lock(mu_);
    if (stopped_system_) return;
    stopped_system_ = true;
    stop_requested_ = true;
    cells = cells_;
  }
  cv_.notify_all();
  for (auto& c : cells) c->close();

  if (manual_) {
    run_all();
  } else {
    std::unique_lock lock(mu_);
    bool drained = cv_.wait_for(lock, grace, [&] { return stopped_ >= cells.size(); });
    if (!drained) {
      spdlog::warn("actor system: {} of {} actors still busy after {} ms; stopping anyway",
                   cells.size() - stopped_, cells.size(), grace.count());
    }
  }
  work_.reset();
  ctx_.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool actor_system::run_one() { return ctx_.poll_one() > 0; }

std::size_t actor_system::run_all() {
  std::size_t n = 0;
  while (ctx_.poll_one() > 0) ++n;
  return n;
}

std::size_t actor_system::run_until(const std::function<bool()>& done) {
  std::size_t n = 0;
  while (!done() && ctx_.poll_one() > 0) ++n;
  return n;
}

bool actor_system::run_one_for(std::chrono::milliseconds timeout) { return ctx_.run_one_for(timeout) > 0; }

bool actor_system::run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    // Checked at every step, not only when idle: actors that keep each other busy forever do not
    // outlast the timeout either.
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (ctx_.poll_one() > 0) continue;
    if (ctx_.run_one_until(deadline) == 0) return done();
  }
  return true;
}

}  // namespace strata::actors
