#pragma once
// compute_pool: one thread per core for the heavy kernels. The calling thread takes part, so a
// pool of n threads starts n - 1. A job is n slots (ith = 0 .. n-1), each taken by whichever
// thread comes first: the caller takes every slot that no worker has taken yet, so a worker the
// OS has put to sleep or taken off its core slows a job down instead of stopping it. Workers spin
// briefly between jobs (a decode step issues hundreds of short jobs) and then sleep, so an idle
// server burns no CPU.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::kernels {

class compute_pool {
 public:
  explicit compute_pool(int n_threads);
  compute_pool(const compute_pool&) = delete;
  compute_pool& operator=(const compute_pool&) = delete;
  ~compute_pool();

  int size() const { return n_; }

  /// Runs fn(ith, nth) once for every slot ith = 0 .. nth-1 (nth = size()), each on whichever
  /// thread takes it (one thread may run several, one after another), and returns when all are
  /// done. Jobs from different callers are serialized. Pass a lambda with several captures as
  /// std::ref(lambda): std::function then keeps a reference instead of allocating a copy.
  void run(const std::function<void(int ith, int nth)>& fn);

  /// Calls fn(task, n_tasks) once for every task in [0, n_tasks), spread over the workers as they
  /// free up (an atomic counter, no allocation); returns when all are done.
  void parallel_for(int n_tasks, const std::function<void(int task, int n_tasks)>& fn);

  /// Calls fn(chunk) once for every chunk in [0, n_chunks): each worker takes its own contiguous
  /// share front to back, and a worker whose share is done takes chunks from the back of the
  /// others' shares. Each core's reads stay one sequential stream, as with fixed shares, but a
  /// core slowed down by another process no longer holds the whole job up.
  void run_shares(std::int64_t n_chunks, const std::function<void(std::int64_t chunk)>& fn);

  /// Calls fn(begin, end) on every worker for its split() range of [0, n) (workers whose range is
  /// empty are not called), and returns when all are done.
  void run_split(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t begin, std::int64_t end)>& fn);

  /// Waits until `flag` is nonzero (read with acquire), spinning and then yielding the core. A
  /// task may wait so on a task of the same job only if that one is already taken by a running
  /// thread (handed out before it, say) and waits on nothing itself.
  static void wait_for(const std::atomic<int>& flag);

  /// Splits [0, n) into one contiguous range per worker, aligned to `grain`.
  static void split(std::int64_t n, std::int64_t grain, int ith, int nth, std::int64_t& begin, std::int64_t& end);

 private:
  void worker();
  /// Takes and runs the free slots of job `gen` until none is left.
  void run_slots(std::uint64_t gen);

  int n_;
  std::vector<std::thread> threads_;
  std::mutex run_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<const std::function<void(int, int)>*> job_{nullptr};
  std::atomic<std::uint64_t> job_state_{0};  // the job's generation << 32 | its next free slot
  std::atomic<int> done_{0};                 // slots of the job that have run
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
};

}  // namespace strata::kernels
