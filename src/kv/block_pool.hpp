#pragma once
// block_pool: the metadata of the paged KV pool — ids, reference counts, chained hashes and the
// LRU of free blocks that still hold a cached prefix. Plain class, no Asio; the scheduler owns one
// and consults it synchronously while it plans each step.
//
//   free lists:  never-filled or invalidated blocks, one list per KV format, handed out first
//   cached LRU:  refcount 0 but hashed; reused on a prefix hit, evicted (hash dropped) when room is
//                needed — least recently released first, whatever its format
//   in use:      refcount > 0 (shared by every sequence whose prefix matches)
//
// Memory is a byte budget: a block costs what its format's pages take in every layer (f16 about
// twice q8_0 and 3.6 times q4_0), so requests with smaller KV fit more tokens in the same RAM.
// Blocks in use and cached blocks together stay within `budget`; cached blocks alone within
// `cached_budget` (the hot tier).

#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::kv {

struct pool_config {
  block_space space;
  /// What one block of each format costs (bytes over all layers, K and V).
  std::array<std::int64_t, 3> block_bytes{1, 1, 1};
  std::int64_t budget = 0;
  std::int64_t cached_budget = 0;
};

class block_pool {
 public:
  explicit block_pool(const pool_config& cfg);
  /// n_blocks f16 blocks; at most cached_limit of them kept cached while no one uses them (-1: no
  /// limit beyond the pool).
  explicit block_pool(std::int32_t n_blocks, std::int32_t cached_limit = -1);

  /// A block of format f with refcount 1: from the free list, after evicting the least recently
  /// released cached blocks if the budget needs it. Empty when the blocks in use leave no room:
  /// the caller preempts, it is not an error.
  std::optional<std::int32_t> allocate(kv_format f = kv_format::f16);
  /// Adds a reference to a block in use.
  void retain(std::int32_t id);
  /// Drops a reference; at zero a hashed block joins the cached LRU, an unhashed one its free list.
  void release(std::int32_t id);
  /// Records that a block holds the prefix with this hash (its parent: the hash of the prefix
  /// before it), so later requests can reuse it. If the block has a hash already, or another block
  /// holds the same hash, nothing changes (the first one stays cached) and the result is false.
  bool set_hash(std::int32_t id, block_hash h, block_hash parent = {});
  /// The block holding this hash, with a reference added for the caller; empty on a miss.
  std::optional<std::int32_t> lookup(const block_hash& h);
  /// The block holding this hash (in use or cached), without a reference or a move in the LRU.
  std::optional<std::int32_t> find(const block_hash& h) const {
    auto it = index_.find(h);
    return it == index_.end() ? std::nullopt : std::optional<std::int32_t>(it->second);
  }
  /// Whether a block holds this hash (in use or cached).
  bool contains(const block_hash& h) const { return index_.contains(h); }
  /// Forgets every hash (cache.mode = off, or a model change).
  void clear_hashes();

  /// Adds `bytes` to what the block holding hash h costs, for as long as it keeps that hash: what
  /// hangs on the block (a frozen state snapshot taken at its end) then counts against the budgets
  /// with it and ages with it in the LRU. When the block loses its hash (evicted, or released
  /// uncached) the bytes go with it, and the hash is listed in take_detached(). False (nothing
  /// changes) when no block holds h.
  bool attach(const block_hash& h, std::int64_t bytes);
  /// Hashes whose attached bytes were dropped since the last call.
  std::vector<block_hash> take_detached() { return std::exchange(detached_, {}); }

  /// A cached block whose hash was dropped to make room; its pages still hold the KV until the
  /// block is next written.
  struct eviction {
    std::int32_t id = -1;
    block_hash hash;
    block_hash parent;
  };
  /// Keep a log of evictions (for the lower tiers, which keep what leaves the pool): cached blocks
  /// evicted, and hashed blocks released with no room to stay cached.
  void record_evictions(bool on) { record_evictions_ = on; }
  /// The evictions since the last call.
  std::vector<eviction> take_evictions() { return std::exchange(evicted_, {}); }

  const block_space& space() const { return cfg_.space; }
  kv_format format_of(std::int32_t id) const { return cfg_.space.format_of(id); }
  std::int32_t capacity() const { return cfg_.space.total(); }
  /// What one block of format f costs (its pages over every layer, K and V).
  std::int64_t block_bytes(kv_format f) const { return cfg_.block_bytes[static_cast<std::size_t>(format_index(f))]; }
  /// Blocks of format f that allocate() could hand out now (evicting cached ones as needed).
  std::int32_t available(kv_format f = kv_format::f16) const;
  std::int32_t free_count() const;
  std::int32_t cached_count() const { return lru_size_; }
  std::int32_t in_use() const { return capacity() - free_count() - cached_count(); }
  std::int32_t free_count(kv_format f) const { return static_cast<std::int32_t>(free_[static_cast<std::size_t>(format_index(f))].size()); }
  std::int32_t cached_count(kv_format f) const { return cached_of_[static_cast<std::size_t>(format_index(f))]; }
  std::int32_t in_use(kv_format f) const { return cfg_.space.count(f) - free_count(f) - cached_count(f); }
  std::int64_t bytes_in_use() const { return used_bytes_ - cached_bytes_; }
  std::int64_t bytes_cached() const { return cached_bytes_; }
  std::int32_t refcount(std::int32_t id) const { return blocks_.at(static_cast<std::size_t>(id)).refs; }
  std::uint64_t evictions() const { return evictions_; }
  /// The byte budget, and the part of it no block uses or caches: what allocate() takes before it
  /// has to evict.
  std::int64_t budget() const { return cfg_.budget; }
  std::int64_t free_bytes() const { return cfg_.budget - used_bytes_; }

  /// Up to n cached blocks, the least recently released first, with their hashes.
  struct cached_block {
    std::int32_t id = -1;
    block_hash hash;
    std::int64_t bytes = 0;
  };
  std::vector<cached_block> oldest_cached(std::size_t n) const;
  /// Evicts this block now if it is still cached (as allocate() would evict the oldest one);
  /// returns whether it was.
  bool evict(std::int32_t id);

 private:
  static constexpr std::int32_t none = -1;
  struct block {
    std::int32_t refs = 0;
    std::optional<block_hash> hash;
    block_hash parent;
    // The cached LRU is an intrusive list through the blocks: no allocation on release.
    std::int32_t prev = none;
    std::int32_t next = none;
    bool in_lru = false;
    std::int64_t attached = 0;  // see attach()
  };
  std::int64_t cost(std::int32_t id) const {
    return block_bytes(format_of(id)) + blocks_[static_cast<std::size_t>(id)].attached;
  }
  /// Returns a block that no longer holds a hash to its free list, with its bytes.
  void free_block(std::int32_t id);
  std::vector<std::int32_t>& free_list(std::int32_t id) { return free_[static_cast<std::size_t>(format_index(format_of(id)))]; }
  void drop_hash(std::int32_t id);
  /// Moves the least recently released cached block to its free list, forgetting its hash.
  void evict_oldest();
  void lru_push_back(std::int32_t id);
  void lru_unlink(std::int32_t id);

  pool_config cfg_;
  std::vector<block> blocks_;
  // Stacks: the most recently freed block is reused first, which keeps the pages touched compact.
  std::array<std::vector<std::int32_t>, 3> free_;
  std::int32_t lru_head_ = none;  // least recently released
  std::int32_t lru_tail_ = none;
  std::int32_t lru_size_ = 0;
  std::array<std::int32_t, 3> cached_of_{};  // cached blocks per format
  std::int64_t used_bytes_ = 0;    // blocks in use or cached
  std::int64_t cached_bytes_ = 0;  // cached blocks
  std::unordered_map<block_hash, std::int32_t, block_hash_hasher> index_;
  std::uint64_t evictions_ = 0;
  bool record_evictions_ = false;
  std::vector<eviction> evicted_;
  std::vector<block_hash> detached_;
};

}  // namespace strata::kv
