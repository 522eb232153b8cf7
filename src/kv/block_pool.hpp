#pragma once
// block_pool: the metadata of the paged KV pool — ids, reference counts, chained hashes and the
// LRU of free blocks that still hold a cached prefix. Plain class: the hot_cache actor owns one.
//
//   free list:   never-filled or invalidated blocks, handed out first
//   cached LRU:  refcount 0 but hashed; reused on a prefix hit, evicted (hash dropped) when the
//                free list is empty — least recently released first
//   in use:      refcount > 0 (shared by every sequence whose prefix matches)

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "src/kv/prefix_hash.hpp"

namespace strata::kv {

class block_pool {
 public:
  /// n_blocks pages; at most cached_limit of them kept as cached blocks that no one uses (the
  /// hot tier's budget): past it the least recently released one is evicted at once.
  explicit block_pool(std::int32_t n_blocks, std::int32_t cached_limit = -1);

  /// A block with refcount 1: from the free list, else by evicting the least recently released
  /// cached block. Empty when every block is in use: the caller preempts, it is not an error.
  std::optional<std::int32_t> allocate();
  /// Adds a reference to a block in use.
  void retain(std::int32_t id);
  /// Drops a reference; at zero a hashed block joins the cached LRU, an unhashed one the free list.
  void release(std::int32_t id);
  /// Records that a full block holds the prefix with this hash, so later requests can reuse it.
  /// If another block already holds the same hash, nothing changes (the first one stays cached).
  void set_hash(std::int32_t id, block_hash h);
  /// The block holding this hash, with a reference added for the caller; empty on a miss.
  std::optional<std::int32_t> lookup(const block_hash& h);
  /// Forgets every hash (cache.mode = off, or a model change).
  void clear_hashes();

  std::int32_t capacity() const { return static_cast<std::int32_t>(blocks_.size()); }
  /// Blocks that allocate() can hand out now (free + cached).
  std::int32_t available() const { return static_cast<std::int32_t>(free_.size()) + lru_size_; }
  std::int32_t free_count() const { return static_cast<std::int32_t>(free_.size()); }
  std::int32_t cached_count() const { return lru_size_; }
  std::int32_t in_use() const { return capacity() - available(); }
  std::int32_t refcount(std::int32_t id) const { return blocks_.at(static_cast<std::size_t>(id)).refs; }
  std::int32_t cached_limit() const { return cached_limit_; }
  std::uint64_t evictions() const { return evictions_; }

 private:
  static constexpr std::int32_t none = -1;
  struct block {
    std::int32_t refs = 0;
    std::optional<block_hash> hash;
    // The cached LRU is an intrusive list through the blocks: no allocation on release.
    std::int32_t prev = none;
    std::int32_t next = none;
    bool in_lru = false;
  };
  void drop_hash(std::int32_t id);
  /// Moves the least recently released cached block to the free list, forgetting its hash.
  void evict_oldest();
  void lru_push_back(std::int32_t id);
  void lru_unlink(std::int32_t id);

  std::vector<block> blocks_;
  std::vector<std::int32_t> free_;  // a stack: the most recently freed block is reused first
  std::int32_t lru_head_ = none;    // least recently released
  std::int32_t lru_tail_ = none;
  std::int32_t lru_size_ = 0;
  std::unordered_map<block_hash, std::int32_t, block_hash_hasher> index_;
  std::int32_t cached_limit_;
  std::uint64_t evictions_ = 0;
};

}  // namespace strata::kv
