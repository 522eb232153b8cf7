#include "kernels/compute_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace strata::kernels {
namespace {

TEST(compute_pool, parallel_for_runs_every_task_exactly_once) {
  for (int threads : {1, 2, 3}) {
    compute_pool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](int task, int n_tasks) {
        EXPECT_EQ(n_tasks, n);
        hits[static_cast<std::size_t>(task)].fetch_add(1);
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << i << " of " << n;
    }
  }
}

TEST(compute_pool, run_shares_runs_every_chunk_exactly_once) {
  for (int threads : {1, 2, 3}) {
    compute_pool pool(threads);
    for (std::int64_t n : {0, 1, 2, 5, 64, 999}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      // Uneven chunks, so that workers finish their shares at different times and take others'.
      pool.run_shares(n, [&](std::int64_t c) {
        if (c % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        hits[static_cast<std::size_t>(c)].fetch_add(1);
      });
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << i << " of " << n;
    }
  }
}

TEST(compute_pool, run_shares_lets_a_free_worker_take_from_a_slow_one) {
  compute_pool pool(2);
  constexpr std::int64_t n = 40;
  std::vector<int> by(n, -1);
  std::atomic<int> worker_of_first{-1};
  // The share of whichever worker starts chunk 0 is slow: the other worker must take some of it.
  pool.run_shares(n, [&](std::int64_t c) {
    const int me = static_cast<int>(std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0x7FFFFFFF);
    if (c == 0) worker_of_first.store(me);
    if (c < n / 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    by[static_cast<std::size_t>(c)] = me;
  });
  int taken = 0;
  for (std::int64_t c = 1; c < n / 2; ++c) taken += by[static_cast<std::size_t>(c)] != worker_of_first.load();
  EXPECT_GT(taken, 0);
}

TEST(compute_pool, run_calls_every_slot_once_per_job) {
  compute_pool pool(3);
  for (int job = 0; job < 200; ++job) {
    std::atomic<int> seen[3] = {};
    pool.run([&](int ith, int nth) {
      EXPECT_EQ(nth, 3);
      seen[ith].fetch_add(1);
    });
    for (auto& s : seen) ASSERT_EQ(s.load(), 1) << "job " << job;
  }
}

// More threads than this machine has cores, and pauses between jobs long enough for workers to
// fall asleep: slots are taken by whoever comes first, the caller included, and each still runs
// exactly once, with the job's own arguments.
TEST(compute_pool, slots_run_once_when_workers_sleep_or_wait_for_a_core) {
  const int threads = static_cast<int>(std::thread::hardware_concurrency()) * 4 + 1;
  compute_pool pool(threads);
  for (int job = 0; job < 300; ++job) {
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(threads));
    std::atomic<int> wrong_job{0};
    pool.run([&, job](int ith, int nth) {
      if (nth != threads) wrong_job.fetch_add(1);
      seen[static_cast<std::size_t>(ith)].fetch_add(job + 1);
    });
    ASSERT_EQ(wrong_job.load(), 0);
    for (int i = 0; i < threads; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), job + 1) << "job " << job << " slot " << i;
    if (job % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the workers' spin
  }
}

// Tasks 0..n-1 each publish a value; task n + i waits for task i's (handed out earlier, so taken
// by a running thread) and reads it: every reader sees its writer's value, with more threads than
// cores and a writer that sleeps.
TEST(compute_pool, wait_for_sees_what_an_earlier_task_of_the_job_published) {
  for (int threads : {1, 2, 5}) {
    compute_pool pool(threads);
    constexpr int n = 64;
    for (int job = 0; job < 20; ++job) {
      std::vector<int> value(n, 0), read(n, -1);
      std::vector<std::atomic<int>> ready(n);
      pool.parallel_for(2 * n, [&](int t, int) {
        if (t < n) {
          if (t % 13 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
          value[static_cast<std::size_t>(t)] = job * n + t + 1;  // plain write, published by the flag
          ready[static_cast<std::size_t>(t)].store(1, std::memory_order_release);
          return;
        }
        compute_pool::wait_for(ready[static_cast<std::size_t>(t - n)]);
        read[static_cast<std::size_t>(t - n)] = value[static_cast<std::size_t>(t - n)];
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(read[static_cast<std::size_t>(i)], job * n + i + 1) << threads << " threads, job " << job;
    }
  }
}

TEST(compute_pool, split_covers_the_range_in_aligned_pieces) {
  for (int nth : {1, 2, 5})
    for (std::int64_t n : {0, 1, 15, 16, 100, 1001}) {
      std::int64_t next = 0;
      for (int i = 0; i < nth; ++i) {
        std::int64_t b, e;
        compute_pool::split(n, 16, i, nth, b, e);
        EXPECT_EQ(b, next);
        EXPECT_TRUE(b % 16 == 0 || b == n);
        EXPECT_LE(b, e);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
}

}  // namespace
}  // namespace strata::kernels
