#pragma once
// buffer_warmer: keeps a block_buffers pool stocked with free buffers whose pages are already
// backed, from a thread of its own at the lowest priority. A step that saves KV blocks to the host
// tier takes a buffer per block; a fresh one is backed page by page as it is taken, and on an
// H200's host 2 GB of them took 0.8-1.0 s inside the step, while every running sequence waited for
// it. With warm buffers the step only copies. Buffers come back to the pool as blocks leave the
// host tier (restored or evicted), so once the tier is full the warmer seldom makes new ones.

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

#include "src/common/block_buffers.hpp"

namespace strata {

class buffer_warmer {
 public:
  /// Keeps at least `target` bytes of free buffers of `buffer_bytes` each in `pool` (within its
  /// limit), checking every 20 ms. Starts the thread.
  buffer_warmer(block_buffers& pool, std::size_t buffer_bytes, std::size_t target);
  /// Stops and joins the thread.
  ~buffer_warmer();
  buffer_warmer(const buffer_warmer&) = delete;
  buffer_warmer& operator=(const buffer_warmer&) = delete;

  /// Bytes of buffers made so far.
  std::size_t made() const;

 private:
  void run(std::stop_token stop);

  block_buffers& pool_;
  std::size_t buffer_bytes_, target_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::size_t made_ = 0;
  std::jthread thread_;  // last: started once the rest is in place
};

}  // namespace strata
