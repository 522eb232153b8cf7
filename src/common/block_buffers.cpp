#include "src/common/block_buffers.hpp"

#include <cstdint>
#include <cstring>
#include <limits>

#include <sys/mman.h>
#include <unistd.h>

namespace strata {

block_buffers& block_buffers::shared() {
  static block_buffers pool(std::size_t{64} << 20);
  return pool;
}

std::optional<std::vector<std::byte>> block_buffers::reuse(std::size_t n) {
  std::lock_guard lock(mu_);
  // The smallest free buffer with room: buffers of one KV format all have one size.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->capacity() >= n && (best == free_.end() || it->capacity() < best->capacity())) best = it;
  if (best == free_.end()) return std::nullopt;
  std::vector<std::byte> v = std::move(*best);
  free_bytes_ -= v.capacity();
  *best = std::move(free_.back());
  free_.pop_back();
  v.resize(n);  // within the capacity: only bytes past the old size are written
  return v;
}

namespace {

/// An empty vector with room for n bytes whose page tables are filled in one call, which costs
/// less than a fault per page as the first write reaches it (a hint: failure is fine).
std::vector<std::byte> fresh(std::size_t n) {
  std::vector<std::byte> v;
  v.reserve(n);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(v.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(v.data()) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
  return v;
}

}  // namespace

std::vector<std::byte> block_buffers::take(std::size_t n) {
  if (auto v = reuse(n)) return std::move(*v);
  std::vector<std::byte> v = fresh(n);
  v.resize(n);
  return v;
}

std::vector<std::byte> block_buffers::copy(const std::byte* p, std::size_t n) {
  if (auto v = reuse(n)) {
    if (n > 0) std::memcpy(v->data(), p, n);
    return std::move(*v);
  }
  std::vector<std::byte> v = fresh(n);
  v.assign(p, p + n);
  return v;
}

void block_buffers::give(std::vector<std::byte>&& v) {
  if (v.capacity() == 0) return;
  std::vector<std::byte> drop;
  std::lock_guard lock(mu_);
  if (free_bytes_ + v.capacity() > max_free_) {
    drop = std::move(v);  // freed after the unlock
    return;
  }
  free_bytes_ += v.capacity();
  free_.push_back(std::move(v));
}

std::size_t block_buffers::prefill(std::size_t n, std::size_t count) {
  return n == 0 ? 0 : top_up(n, std::numeric_limits<std::size_t>::max(), n * count) / n;
}

std::size_t block_buffers::top_up(std::size_t n, std::size_t target, std::size_t most) {
  std::size_t made = 0;
  while (n > 0 && made + n <= most) {
    {
      std::lock_guard lock(mu_);
      if (free_bytes_ >= target || free_bytes_ + n > max_free_) break;
    }
    std::vector<std::byte> v = fresh(n);
    v.resize(n);
    give(std::move(v));
    made += n;
  }
  return made;
}

void block_buffers::set_max_free(std::size_t bytes) {
  std::vector<std::vector<std::byte>> drop;  // freed after the unlock
  std::lock_guard lock(mu_);
  max_free_ = bytes;
  while (free_bytes_ > max_free_ && !free_.empty()) {
    free_bytes_ -= free_.back().capacity();
    drop.push_back(std::move(free_.back()));
    free_.pop_back();
  }
}

std::size_t block_buffers::free_bytes() const {
  std::lock_guard lock(mu_);
  return free_bytes_;
}

std::size_t block_buffers::free_count() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

}  // namespace strata
