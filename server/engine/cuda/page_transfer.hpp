#pragma once
// KV pages between the device's page pools and host RAM (the hot tier's frozen blocks), for the
// GPU stages' save_pages and load_pages. The frozen blocks are ordinary (pageable) host memory,
// where a copy per page runs at a fraction of the link's speed and costs a call each (64 calls a
// block for a 32-layer model). So blocks move in chunks through two pinned host buffers and two
// device buffers: a restore copies a chunk of the layer's pages out of the frozen blocks into a
// pinned buffer (on several threads), queues one host-to-device copy of the chunk and one kernel
// that scatters it into the pages, all on a stream of its own, and meanwhile fills the other
// pinned buffer. A restore returns once the host bytes have been read: the copies finish on the
// transfer stream while the compute stream runs other sequences' kernels, and only the work
// queued on the compute stream after the restore waits for them (an event).

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/compute_pool.hpp"
#include "kernels/cuda/device.hpp"

namespace strata::engine::gpu {

class page_transfer {
 public:
  /// chunk_bytes: the size of each of the two pinned (and device) staging buffers.
  explicit page_transfer(std::size_t chunk_bytes = std::size_t{32} << 20);
  ~page_transfer();
  page_transfer(const page_transfer&) = delete;
  page_transfer& operator=(const page_transfer&) = delete;

  /// One layer's pages and the host bytes they move to or from: block blocks[i]'s key page is
  /// host[i][0, page_bytes) and its value page host[i][page_bytes, 2 page_bytes).
  struct pages {
    void* k = nullptr;
    void* v = nullptr;
    std::size_t page_bytes = 0;
  };

  /// Copies the host pages into the pools, once `last_use` (recorded after the last kernels that
  /// touched these pages) is complete; with no event, after all the work queued on `compute` so
  /// far. Returns when the host bytes have been read; the work queued on `compute` afterwards
  /// waits for the copies. `compute_mu` is held while this touches the compute stream (the
  /// stages' lock).
  void load(const pages& p, const std::vector<const std::byte*>& host, const std::vector<std::int32_t>& blocks, cudaStream_t compute,
            std::mutex& compute_mu, cudaEvent_t last_use = nullptr);
  /// Copies the pools' pages into the host pages, after `last_use` as for load; returns when they
  /// are there.
  void save(const pages& p, const std::vector<std::byte*>& host, const std::vector<std::int32_t>& blocks, cudaStream_t compute,
            std::mutex& compute_mu, cudaEvent_t last_use = nullptr);

 private:
  /// One of the two staging halves: pinned host bytes, device bytes, room for the block ids of a
  /// chunk after the pages in both, and the event after its last use on the stream.
  struct half {
    std::byte* host = nullptr;
    kernels::cuda::device_buffer dev;
    cudaEvent_t done = nullptr;
  };
  /// Entries of 2 page_bytes that fit in a chunk (at least one: the halves grow for bigger pages).
  std::size_t entries_per_chunk(std::size_t page_bytes);
  /// The transfer stream waits for last_use, or (null) for the work queued on compute so far.
  void after_compute(cudaStream_t compute, std::mutex& compute_mu, cudaEvent_t last_use);
  /// Copies n entries of `entry` bytes between host pointers and the packed half, on the pool.
  void copy_entries(std::byte* packed, const std::byte* const* src, std::byte* const* dst, std::size_t n, std::size_t entry);

  std::mutex mu_;  // one transfer at a time
  std::size_t chunk_bytes_;
  std::size_t capacity_ = 0;  // bytes of pages each half holds now (0 until the first transfer)
  std::size_t ids_ = 0;       // block ids each half holds after them
  cudaStream_t stream_ = nullptr;
  cudaEvent_t before_ = nullptr, after_ = nullptr;
  half halves_[2];
  kernels::compute_pool pool_;
};

}  // namespace strata::engine::gpu
