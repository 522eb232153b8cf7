#pragma once
// block_buffers: byte buffers for frozen KV blocks (a block's pages over every layer on their way
// to or from the SSD), recycled. Memory the process has not written yet costs far more to write
// the first time than memory it reuses: the kernel supplies zeroed pages one fault at a time, and
// on a virtual machine the host then backs each of them too (there, the first write into fresh
// memory runs at about 1 GB/s against 15 for the same copy into reused memory). A tier that moves
// tens of megabytes per prompt takes its buffers from here and gives them back once the block is
// written out or loaded into the pages.

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

namespace strata {

class block_buffers {
 public:
  /// The process's pool. Up to 64 MiB of free buffers are kept; more are freed.
  static block_buffers& shared();

  explicit block_buffers(std::size_t max_free_bytes) : max_free_(max_free_bytes) {}

  /// A buffer of exactly n bytes, with whatever they held: a free one when one has room, else new.
  std::vector<std::byte> take(std::size_t n);
  /// A buffer holding a copy of p[0, n): a free one when one has room, else a new one written
  /// straight from p (not zeroed first).
  std::vector<std::byte> copy(const std::byte* p, std::size_t n);
  /// Takes a buffer back (or frees it when the free ones already fill the limit).
  void give(std::vector<std::byte>&& v);
  /// Writes `count` new buffers of n bytes now and keeps them, as far as the limit allows: the
  /// first blocks that need buffers then find warm ones. Returns how many it made.
  std::size_t prefill(std::size_t n, std::size_t count);

  /// Makes new buffers of n bytes, their pages backed, while the free ones hold less than
  /// `target` bytes and the limit allows, `most` bytes of them at most; returns the bytes made.
  /// For buffer_warmer, off the threads that wait for a buffer.
  std::size_t top_up(std::size_t n, std::size_t target, std::size_t most);
  /// The bytes of free buffers kept (shared(): 64 MiB until set).
  void set_max_free(std::size_t bytes);

  std::size_t free_bytes() const;
  std::size_t free_count() const;

 private:
  /// A free buffer with room for n bytes, resized to n; nullopt when there is none.
  std::optional<std::vector<std::byte>> reuse(std::size_t n);

  mutable std::mutex mu_;
  std::vector<std::vector<std::byte>> free_;
  std::size_t free_bytes_ = 0;
  std::size_t max_free_;
};

}  // namespace strata
