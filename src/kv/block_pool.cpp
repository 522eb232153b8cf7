#include "src/kv/block_pool.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata::kv {

block_pool::block_pool(std::int32_t n_blocks, std::int32_t cached_limit)
    : blocks_(static_cast<std::size_t>(n_blocks)), cached_limit_(cached_limit < 0 ? n_blocks : std::min(cached_limit, n_blocks)) {
  free_.reserve(static_cast<std::size_t>(n_blocks));
  for (std::int32_t i = n_blocks - 1; i >= 0; --i) free_.push_back(i);
  index_.reserve(static_cast<std::size_t>(n_blocks));
}

std::optional<std::int32_t> block_pool::allocate() {
  std::int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (lru_head_ != none) {
    evict_oldest();
    id = free_.back();
    free_.pop_back();
  } else {
    return std::nullopt;
  }
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
  if (b.hash && cached_limit_ > 0) {
    lru_push_back(id);
    if (lru_size_ > cached_limit_) evict_oldest();
  } else {
    drop_hash(id);
    free_.push_back(id);
  }
}

void block_pool::set_hash(std::int32_t id, block_hash h) {
  auto& b = blocks_.at(static_cast<std::size_t>(id));
  if (b.hash || index_.contains(h)) return;
  b.hash = h;
  index_.emplace(h, id);
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

void block_pool::evict_oldest() {
  const std::int32_t id = lru_head_;
  lru_unlink(id);
  drop_hash(id);
  free_.push_back(id);
  ++evictions_;
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
}

void block_pool::drop_hash(std::int32_t id) {
  auto& b = blocks_[static_cast<std::size_t>(id)];
  if (b.hash) {
    index_.erase(*b.hash);
    b.hash.reset();
  }
}

void block_pool::clear_hashes() {
  while (lru_head_ != none) {
    std::int32_t id = lru_head_;
    lru_unlink(id);
    free_.push_back(id);
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i) drop_hash(static_cast<std::int32_t>(i));
}

}  // namespace strata::kv
