#include "kernels/compute_pool.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#define STRATA_PAUSE() _mm_pause()
#else
#define STRATA_PAUSE() std::this_thread::yield()
#endif

namespace strata::kernels {

namespace {
constexpr auto k_spin = std::chrono::microseconds(200);
}

compute_pool::compute_pool(int n_threads) : n_(std::max(1, n_threads)) {
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this] { worker(); });
}

compute_pool::~compute_pool() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void compute_pool::split(std::int64_t n, std::int64_t grain, int ith, int nth, std::int64_t& begin, std::int64_t& end) {
  std::int64_t chunks = (n + grain - 1) / grain;
  std::int64_t per = chunks / nth, extra = chunks % nth;
  std::int64_t c0 = ith * per + std::min<std::int64_t>(ith, extra);
  std::int64_t c1 = c0 + per + (ith < extra ? 1 : 0);
  begin = std::min(n, c0 * grain);
  end = std::min(n, c1 * grain);
}

void compute_pool::run(const std::function<void(int, int)>& fn) {
  if (n_ == 1) {
    fn(0, 1);
    return;
  }
  std::lock_guard run_lock(run_mu_);
  std::uint64_t gen;
  {
    std::lock_guard lock(mu_);
    job_.store(&fn, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    gen = ((job_state_.load(std::memory_order_relaxed) >> 32) + 1) & 0xFFFFFFFFu;  // wraps after 2^32 jobs
    job_state_.store(gen << 32, std::memory_order_release);  // slot 0 next
  }
  if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_all();
  // This thread takes slots too, as many as no worker has taken yet: a worker that is asleep or
  // off its core holds no part of the job up.
  run_slots(gen);
  // What is left is in the hands of workers that are running it. One that the OS has taken off
  // its core gets it back sooner if this thread stops spinning and yields.
  for (int spins = 0; done_.load(std::memory_order_acquire) != n_; ++spins) {
    if (spins < 4096) STRATA_PAUSE();
    else std::this_thread::yield();
  }
}

void compute_pool::wait_for(const std::atomic<int>& flag) {
  for (int spins = 0; flag.load(std::memory_order_acquire) == 0; ++spins) {
    if (spins < 4096) STRATA_PAUSE();
    else std::this_thread::yield();
  }
}

void compute_pool::run_slots(std::uint64_t gen) {
  for (std::uint64_t s = job_state_.load(std::memory_order_acquire);;) {
    if (s >> 32 != gen || static_cast<int>(s & 0xFFFFFFFFu) >= n_) return;
    if (!job_state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // A slot of job gen is taken and not done, so run() has not returned: job_ is still its job.
    (*job_.load(std::memory_order_acquire))(static_cast<int>(s & 0xFFFFFFFFu), n_);
    done_.fetch_add(1, std::memory_order_acq_rel);
    s = job_state_.load(std::memory_order_acquire);
  }
}

void compute_pool::parallel_for(int n_tasks, const std::function<void(int, int)>& fn) {
  if (n_tasks <= 0) return;
  if (n_ == 1 || n_tasks == 1) {
    for (int t = 0; t < n_tasks; ++t) fn(t, n_tasks);
    return;
  }
  std::atomic<int> next{0};
  auto job = [&](int, int) {
    for (int t = next.fetch_add(1, std::memory_order_relaxed); t < n_tasks; t = next.fetch_add(1, std::memory_order_relaxed))
      fn(t, n_tasks);
  };
  run(std::ref(job));  // a reference_wrapper: std::function stores it without allocating
}

void compute_pool::run_split(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  auto job = [&](int ith, int nth) {
    std::int64_t b, e;
    split(n, grain, ith, nth, b, e);
    if (b < e) fn(b, e);
  };
  run(std::ref(job));
}

void compute_pool::run_shares(std::int64_t n_chunks, const std::function<void(std::int64_t)>& fn) {
  constexpr int k_max_shares = 64;
  if (n_ == 1 || n_chunks <= 1 || n_ > k_max_shares || n_chunks > UINT32_MAX) {
    for (std::int64_t c = 0; c < n_chunks; ++c) fn(c);
    return;
  }
  // A share is [front, back) in one word: the owner takes the front, the others the back.
  struct alignas(64) share {
    std::atomic<std::uint64_t> range;
  };
  share shares[k_max_shares];
  for (int i = 0; i < n_; ++i) {
    std::int64_t b, e;
    split(n_chunks, 1, i, n_, b, e);
    shares[i].range.store(static_cast<std::uint64_t>(b) | static_cast<std::uint64_t>(e) << 32, std::memory_order_relaxed);
  }
  // Takes one chunk off the front or the back of a share; -1 when it is empty.
  auto take = [](share& s, bool front) -> std::int64_t {
    std::uint64_t v = s.range.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t f = v & 0xFFFFFFFFu, b = v >> 32;
      if (f >= b) return -1;
      const std::uint64_t next = front ? v + 1 : f | (b - 1) << 32;
      if (s.range.compare_exchange_weak(v, next, std::memory_order_relaxed)) return static_cast<std::int64_t>(front ? f : b - 1);
    }
  };
  auto job = [&](int ith, int nth) {
    for (std::int64_t c; (c = take(shares[ith], true)) >= 0;) fn(c);
    for (int j = 1; j < nth; ++j)
      for (std::int64_t c; (c = take(shares[(ith + j) % nth], false)) >= 0;) fn(c);
  };
  run(std::ref(job));
}

void compute_pool::worker() {
  std::uint64_t seen = 0;
  auto gen = [this] { return job_state_.load(std::memory_order_acquire) >> 32; };
  for (;;) {
    auto spin_until = std::chrono::steady_clock::now() + k_spin;
    int spins = 0;
    while (gen() == seen && !stop_.load(std::memory_order_relaxed)) {
      STRATA_PAUSE();
      if (++spins % 256 == 0 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock lock(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lock, [&] { return gen() != seen || stop_.load(); });
        sleepers_.fetch_sub(1);
      }
    }
    if (stop_.load()) return;
    seen = gen();
    run_slots(seen);
  }
}

}  // namespace strata::kernels
