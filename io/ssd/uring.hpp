#pragma once
// uring: one io_uring ring, the eventfd it signals, and a fixed set of page-aligned staging
// buffers ("slots"), one per I/O in flight. Operations are value structs naming a slot; prepare()
// is the one place that turns them into SQEs. Plain class, no threads: its owner calls it from one
// thread at a time.
//
// The slots are registered with the kernel as fixed buffers (a sparse table filled as each slot's
// buffer is mapped or grown) so that reads and writes skip pinning pages per I/O. When the kernel
// refuses (RLIMIT_MEMLOCK), the ring logs it once and uses plain reads and writes.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include <liburing.h>

#include "src/common/error.hpp"

namespace strata::ssd {

/// Read `length` bytes at `offset` of `fd` into the start of slot `slot`'s buffer.
struct read_op {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  unsigned slot = 0;
};

/// Write the first `length` bytes of slot `slot`'s buffer at `offset` of `fd`.
struct write_op {
  int fd = -1;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  unsigned slot = 0;
};

using io_op = std::variant<read_op, write_op>;

/// A finished operation: its slot and the kernel's result (bytes moved, or -errno).
struct io_done {
  unsigned slot = 0;
  int res = 0;
};

class uring {
 public:
  /// A ring of `slots` submission entries with as many staging slots (no buffer mapped yet).
  static result<std::unique_ptr<uring>> create(unsigned slots);
  /// Waits (at most a few seconds) for the I/O in flight before unmapping the buffers; a buffer
  /// still in flight after that is leaked rather than handed back while the kernel may write it.
  ~uring();
  uring(const uring&) = delete;
  uring& operator=(const uring&) = delete;

  /// Readable while completions are waiting, or after signal().
  int event_fd() const { return event_fd_; }
  unsigned slots() const { return static_cast<unsigned>(slots_.size()); }
  std::byte* buffer(unsigned slot) const { return slots_[slot].data; }
  std::size_t capacity(unsigned slot) const { return slots_[slot].bytes; }
  /// Bytes mapped for all slots together.
  std::size_t mapped_bytes() const { return mapped_bytes_; }
  /// Whether any slot is registered as a fixed buffer.
  bool fixed_buffers() const { return fixed_; }
  unsigned in_flight() const { return in_flight_; }
  bool busy(unsigned slot) const { return slots_[slot].busy; }

  /// Makes the slot's buffer at least `bytes` long (rounded up to 64 KiB, zero-filled when newly
  /// mapped). The slot must have no I/O in flight. False when the memory cannot be mapped.
  bool reserve(unsigned slot, std::size_t bytes);

  /// Queues the SQE for `op`; its slot must be idle and reserved for the length. submit() hands
  /// it to the kernel.
  void prepare(const io_op& op);
  /// Hands every prepared SQE to the kernel.
  void submit();
  /// Appends the finished operations to `out` without blocking.
  void reap(std::vector<io_done>& out);
  /// Blocks until a completion is waiting or the deadline passes.
  void wait(std::chrono::steady_clock::time_point deadline);
  /// Empties the eventfd's counter (before reaping, so that a later completion signals again).
  void clear_event();
  /// Makes event_fd() readable: results are waiting that needed no I/O.
  void signal();

 private:
  struct slot {
    std::byte* data = nullptr;
    std::size_t bytes = 0;
    bool busy = false;
    bool registered = false;
  };

  uring() = default;
  void unregister(unsigned slot);

  io_uring ring_{};
  bool ring_ready_ = false;
  int event_fd_ = -1;
  bool fixed_ = false;
  bool fixed_warned_ = false;
  unsigned in_flight_ = 0;
  unsigned prepared_ = 0;
  std::size_t mapped_bytes_ = 0;
  std::vector<slot> slots_;
};

}  // namespace strata::ssd
