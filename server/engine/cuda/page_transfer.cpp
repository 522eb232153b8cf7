#include "server/engine/cuda/page_transfer.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "kernels/cuda/kv_store.hpp"

namespace strata::engine::gpu {
namespace {

namespace cu = kernels::cuda;

/// Threads that copy between the frozen blocks and the pinned buffers: one core's memcpy moves
/// about 10 GB/s, a quarter of what the link takes.
int copy_threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u)); }

}  // namespace

page_transfer::page_transfer(std::size_t chunk_bytes) : chunk_bytes_(chunk_bytes), pool_(copy_threads()) {
  cu::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (page transfers)");
  cu::check(cudaEventCreateWithFlags(&before_, cudaEventDisableTiming), "cudaEventCreate");
  cu::check(cudaEventCreateWithFlags(&after_, cudaEventDisableTiming), "cudaEventCreate");
  for (auto& h : halves_) cu::check(cudaEventCreateWithFlags(&h.done, cudaEventDisableTiming), "cudaEventCreate");
}

page_transfer::~page_transfer() {
  cudaStreamSynchronize(stream_);
  for (auto& h : halves_) {
    if (h.host) cudaFreeHost(h.host);
    cudaEventDestroy(h.done);
  }
  cudaEventDestroy(before_);
  cudaEventDestroy(after_);
  cudaStreamDestroy(stream_);
}

std::size_t page_transfer::entries_per_chunk(std::size_t page_bytes) {
  const std::size_t entry = 2 * page_bytes, n = std::max<std::size_t>(1, chunk_bytes_ / entry);
  if (capacity_ >= n * entry && ids_ >= n) return std::min(n, ids_);
  cu::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (page transfers)");
  capacity_ = std::max(capacity_, n * entry);
  ids_ = std::max(ids_, n);
  for (auto& h : halves_) {
    if (h.host) cu::check(cudaFreeHost(h.host), "cudaFreeHost");
    h.host = nullptr;
    void* p = nullptr;
    cu::check(cudaHostAlloc(&p, capacity_ + ids_ * 4, cudaHostAllocDefault), "cudaHostAlloc (page transfers)");
    h.host = static_cast<std::byte*>(p);
    h.dev = cu::device_buffer();
    h.dev = cu::device_buffer(capacity_ + ids_ * 4);
  }
  return n;
}

void page_transfer::after_compute(cudaStream_t compute, std::mutex& compute_mu, cudaEvent_t last_use) {
  if (!last_use) {
    std::lock_guard lock(compute_mu);
    cu::check(cudaEventRecord(before_, compute), "cudaEventRecord");
    last_use = before_;
  }
  cu::check(cudaStreamWaitEvent(stream_, last_use, 0), "cudaStreamWaitEvent");
}

void page_transfer::copy_entries(std::byte* packed, const std::byte* const* src, std::byte* const* dst, std::size_t n, std::size_t entry) {
  pool_.parallel_for(static_cast<int>(n), [&](int i, int) {
    std::byte* at = packed + static_cast<std::size_t>(i) * entry;
    if (src) std::memcpy(at, src[i], entry);
    else std::memcpy(dst[i], at, entry);
  });
}

void page_transfer::load(const pages& p, const std::vector<const std::byte*>& host, const std::vector<std::int32_t>& blocks,
                         cudaStream_t compute, std::mutex& compute_mu, cudaEvent_t last_use) {
  if (blocks.empty()) return;
  std::lock_guard lock(mu_);
  const std::size_t per = entries_per_chunk(p.page_bytes), entry = 2 * p.page_bytes;
  // The pages to be written may still be read or written by kernels queued before (a block freed
  // by a sequence whose last step is still running).
  after_compute(compute, compute_mu, last_use);
  int which = 0;
  for (std::size_t start = 0; start < blocks.size(); start += per, which ^= 1) {
    const std::size_t n = std::min(per, blocks.size() - start);
    half& h = halves_[which];
    cu::check(cudaEventSynchronize(h.done), "cudaEventSynchronize");  // its previous chunk is in the pages
    copy_entries(h.host, host.data() + start, nullptr, n, entry);
    std::memcpy(h.host + capacity_, blocks.data() + start, n * 4);
    auto* dev = static_cast<std::byte*>(h.dev.data());
    cu::check(cudaMemcpyAsync(dev, h.host, n * entry, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (restore)");
    cu::check(cudaMemcpyAsync(dev + capacity_, h.host + capacity_, n * 4, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (restore)");
    cu::move_pages(dev, reinterpret_cast<const std::int32_t*>(dev + capacity_), static_cast<int>(n), p.page_bytes, p.k, p.v, true,
                   stream_);
    cu::check(cudaEventRecord(h.done, stream_), "cudaEventRecord");
  }
  cu::check(cudaEventRecord(after_, stream_), "cudaEventRecord");
  std::lock_guard compute_lock(compute_mu);
  cu::check(cudaStreamWaitEvent(compute, after_, 0), "cudaStreamWaitEvent");
}

void page_transfer::save(const pages& p, const std::vector<std::byte*>& host, const std::vector<std::int32_t>& blocks, cudaStream_t compute,
                         std::mutex& compute_mu, cudaEvent_t last_use) {
  if (blocks.empty()) return;
  std::lock_guard lock(mu_);
  const std::size_t per = entries_per_chunk(p.page_bytes), entry = 2 * p.page_bytes;
  after_compute(compute, compute_mu, last_use);
  // Chunk k is gathered and copied down on half k % 2 while chunk k - 1 is copied out of the other.
  auto copy_out = [&](std::size_t chunk) {
    const std::size_t start = chunk * per, n = std::min(per, blocks.size() - start);
    half& h = halves_[chunk % 2];
    cu::check(cudaEventSynchronize(h.done), "cudaEventSynchronize");
    copy_entries(h.host, nullptr, host.data() + start, n, entry);
  };
  const std::size_t chunks = (blocks.size() + per - 1) / per;
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t start = k * per, n = std::min(per, blocks.size() - start);
    half& h = halves_[k % 2];
    auto* dev = static_cast<std::byte*>(h.dev.data());
    std::memcpy(h.host + capacity_, blocks.data() + start, n * 4);
    cu::check(cudaMemcpyAsync(dev + capacity_, h.host + capacity_, n * 4, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (save)");
    cu::move_pages(dev, reinterpret_cast<const std::int32_t*>(dev + capacity_), static_cast<int>(n), p.page_bytes, p.k, p.v, false,
                   stream_);
    cu::check(cudaMemcpyAsync(h.host, dev, n * entry, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (save)");
    cu::check(cudaEventRecord(h.done, stream_), "cudaEventRecord");
    if (k > 0) copy_out(k - 1);
  }
  copy_out(chunks - 1);
}

}  // namespace strata::engine::gpu
