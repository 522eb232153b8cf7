#include "src/kv/block_pool.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata::kv {
namespace {

pool_config single_format(std::int32_t n_blocks, std::int32_t cached_limit) {
  pool_config c;
  c.space.capacity = {n_blocks, 0, 0};
  c.block_bytes = {1, 1, 1};
  c.budget = n_blocks;
  c.cached_budget = cached_limit < 0 ? n_blocks : std::min(cached_limit, n_blocks);
  return c;
}

}  // namespace

block_pool::block_pool(std::int32_t n_blocks, std::int32_t cached_limit) : block_pool(single_format(n_blocks, cached_limit)) {}

block_pool::block_pool(const pool_config& cfg) : cfg_(cfg), blocks_(static_cast<std::size_t>(cfg.space.total())) {
  for (kv_format f : k_kv_formats) {
    auto& list = free_[static_cast<std::size_t>(format_index(f))];
    const std::int32_t base = cfg_.space.base(f), n = cfg_.space.count(f);
    list.reserve(static_cast<std::size_t>(n));
    for (std::int32_t i = n - 1; i >= 0; --i) list.push_back(base + i);
  }
  index_.reserve(blocks_.size());
}

std::int32_t block_pool::free_count() const {
  return static_cast<std::int32_t>(free_[0].size() + free_[1].size() + free_[2].size());
}

std::int32_t block_pool::available(kv_format f) const {
  const auto i = static_cast<std::size_t>(format_index(f));
  if (cfg_.block_bytes[i] <= 0 || cfg_.space.capacity[i] == 0) return 0;
  // Every cached block can be evicted; ids of this format are its free ones and its cached ones.
  const std::int32_t cached_here = cached_of_[i];
  const std::int64_t by_bytes = (cfg_.budget - bytes_in_use()) / cfg_.block_bytes[i];
  return static_cast<std::int32_t>(std::min<std::int64_t>(by_bytes, static_cast<std::int64_t>(free_[i].size()) + cached_here));
}

std::optional<std::int32_t> block_pool::allocate(kv_format f) {
  const auto i = static_cast<std::size_t>(format_index(f));
  if (cfg_.space.capacity[i] == 0) return std::nullopt;
  const std::int64_t need = cfg_.block_bytes[i];
  while ((used_bytes_ + need > cfg_.budget || free_[i].empty()) && lru_head_ != none) evict_oldest();
  if (used_bytes_ + need > cfg_.budget || free_[i].empty()) return std::nullopt;
  const std::int32_t id = free_[i].back();
  free_[i].pop_back();
  used_bytes_ += need;
  blocks_[static_cast<std::size_t>(id)].refs = 1;
  return id;
}

void block_pool::retain(std::int32_t id) {
  auto& b = blocks_.at(static_cast<std::size_t>(id));
  if (b.refs <= 0) throw std::logic_error("block_pool::retain on a block not in use");
  ++b.refs;
}

void block_pool::release(std::int32_t id) {
  auto& b = blocks_.at(static_cast<std::size_t>(id));
  if (b.refs <= 0) throw std::logic_error("block_pool::release on a block not in use");
  if (--b.refs > 0) return;
  if (b.hash && cost(id) <= cfg_.cached_budget) {
    lru_push_back(id);
    while (cached_bytes_ > cfg_.cached_budget) evict_oldest();
  } else {
    // A hashed block with no room to stay cached leaves the pool as an evicted one does (its
    // pages still hold the KV until next written), for a lower tier to keep.
    if (b.hash && record_evictions_) evicted_.push_back(eviction{id, *b.hash, b.parent});
    free_block(id);
  }
}

void block_pool::free_block(std::int32_t id) {
  drop_hash(id);
  free_list(id).push_back(id);
  used_bytes_ -= cost(id);
  blocks_[static_cast<std::size_t>(id)].attached = 0;
}

bool block_pool::attach(const block_hash& h, std::int64_t bytes) {
  auto it = index_.find(h);
  if (it == index_.end()) return false;
  const std::int32_t id = it->second;
  auto& b = blocks_[static_cast<std::size_t>(id)];
  used_bytes_ += bytes;
  if (b.in_lru) cached_bytes_ += bytes;
  b.attached += bytes;
  // What hangs on cached blocks stays within the hot tier's budget too.
  while (cached_bytes_ > cfg_.cached_budget && lru_head_ != none) evict_oldest();
  return true;
}

bool block_pool::set_hash(std::int32_t id, block_hash h, block_hash parent) {
  auto& b = blocks_.at(static_cast<std::size_t>(id));
  if (b.hash || index_.contains(h)) return false;
  b.hash = h;
  b.parent = parent;
  index_.emplace(h, id);
  return true;
}

std::optional<std::int32_t> block_pool::lookup(const block_hash& h) {
  auto it = index_.find(h);
  if (it == index_.end()) return std::nullopt;
  std::int32_t id = it->second;
  auto& b = blocks_[static_cast<std::size_t>(id)];
  if (b.in_lru) lru_unlink(id);
  ++b.refs;
  return id;
}

void block_pool::evict_oldest() { evict(lru_head_); }

std::vector<block_pool::cached_block> block_pool::oldest_cached(std::size_t n) const {
  std::vector<cached_block> out;
  for (std::int32_t id = lru_head_; id != none && out.size() < n; id = blocks_[static_cast<std::size_t>(id)].next)
    out.push_back({id, *blocks_[static_cast<std::size_t>(id)].hash, cost(id)});
  return out;
}

bool block_pool::evict(std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= blocks_.size() || !blocks_[static_cast<std::size_t>(id)].in_lru) return false;
  lru_unlink(id);
  if (record_evictions_) {
    const auto& b = blocks_[static_cast<std::size_t>(id)];
    evicted_.push_back(eviction{id, *b.hash, b.parent});
  }
  free_block(id);
  ++evictions_;
  return true;
}

void block_pool::lru_push_back(std::int32_t id) {
  auto& b = blocks_[static_cast<std::size_t>(id)];
  b.prev = lru_tail_;
  b.next = none;
  if (lru_tail_ != none) blocks_[static_cast<std::size_t>(lru_tail_)].next = id;
  else lru_head_ = id;
  lru_tail_ = id;
  b.in_lru = true;
  ++lru_size_;
  ++cached_of_[static_cast<std::size_t>(format_index(format_of(id)))];
  cached_bytes_ += cost(id);
}

void block_pool::lru_unlink(std::int32_t id) {
  auto& b = blocks_[static_cast<std::size_t>(id)];
  if (b.prev != none) blocks_[static_cast<std::size_t>(b.prev)].next = b.next;
  else lru_head_ = b.next;
  if (b.next != none) blocks_[static_cast<std::size_t>(b.next)].prev = b.prev;
  else lru_tail_ = b.prev;
  b.prev = b.next = none;
  b.in_lru = false;
  --lru_size_;
  --cached_of_[static_cast<std::size_t>(format_index(format_of(id)))];
  cached_bytes_ -= cost(id);
}

void block_pool::drop_hash(std::int32_t id) {
  auto& b = blocks_[static_cast<std::size_t>(id)];
  if (b.hash) {
    if (b.attached > 0) detached_.push_back(*b.hash);
    index_.erase(*b.hash);
    b.hash.reset();
  }
}

void block_pool::clear_hashes() {
  while (lru_head_ != none) evict_oldest();
  for (std::size_t i = 0; i < blocks_.size(); ++i) drop_hash(static_cast<std::int32_t>(i));
}

}  // namespace strata::kv
