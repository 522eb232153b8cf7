#include "src/common/buffer_warmer.hpp"

#include <algorithm>
#include <chrono>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace strata {

buffer_warmer::buffer_warmer(block_buffers& pool, std::size_t buffer_bytes, std::size_t target)
    : pool_(pool), buffer_bytes_(buffer_bytes), target_(target), thread_([this](std::stop_token stop) { run(stop); }) {}

buffer_warmer::~buffer_warmer() {
  thread_.request_stop();
  cv_.notify_all();
}

std::size_t buffer_warmer::made() const {
  std::lock_guard lock(mu_);
  return made_;
}

void buffer_warmer::run(std::stop_token stop) {
  // The lowest priority: this thread only gets ahead of demand, it never competes with compute.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  constexpr std::size_t k_step = std::size_t{64} << 20;  // then a look at the stop request
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    lock.unlock();
    const std::size_t n = buffer_bytes_ > 0 ? pool_.top_up(buffer_bytes_, target_, std::max(k_step, buffer_bytes_)) : 0;
    lock.lock();
    made_ += n;
    if (n > 0) continue;
    cv_.wait_for(lock, stop, std::chrono::milliseconds(20), [] { return false; });
  }
}

}  // namespace strata
