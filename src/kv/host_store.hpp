#pragma once
// host_store: the host tier's frozen blocks, by hash, least recently used first, within a byte
// budget. Plain class, no Asio; the host_tier actor owns one (actors/host_tier/).
//
// Each record is a copy, taken by value when its block left the KV pool (an eviction): the
// block's pages over every layer, in pipeline::frozen_block's layout, with what the SSD record
// keeps beside them (parent, format, a tail's tokens). Nothing here refers to a live page. A
// record read back for a restore leaves the store with its bytes (take()): the pool holds the
// block again, and saves it again should it evict it; no second copy is made on the way up.
//
//   records:  hash -> { parent, format, token_ids, spill, bytes }   (an index into the LRU)
//   LRU:      oldest ... newest; put() and get() move a record to the newest end; put() evicts
//             from the oldest end until the bytes fit the budget

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::kv {

/// One frozen block in host memory.
struct host_record {
  block_hash hash;
  block_hash parent;
  kv_format format = kv_format::f16;
  /// A partial block's tokens; empty for a full block, which its hash names.
  std::vector<std::int32_t> token_ids;
  /// When evicted, it goes on to the SSD tier (which lacks it); else it is dropped.
  bool spill = false;
  std::vector<std::byte> bytes;
};

/// What the store did since it was made.
struct host_store_stats {
  std::uint64_t stored = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions = 0;
  /// Records refused for being larger than the whole budget.
  std::uint64_t refused = 0;
};

class host_store {
 public:
  explicit host_store(std::int64_t budget) : budget_(budget) {}

  /// Keeps r as the newest record (replacing one with its hash). Returns the records evicted to
  /// make room, oldest first; r itself when it alone exceeds the budget (nothing else changes).
  std::vector<host_record> put(host_record r);
  /// The record with this hash, made the newest; nullptr on a miss. Valid until the next put(),
  /// take() or clear().
  const host_record* get(const block_hash& h);
  /// The record with this hash, left where it is in the LRU and out of the figures (a copy of it
  /// leaves for another replica); nullptr on a miss. Valid until the next put(), take() or clear().
  const host_record* peek(const block_hash& h) const {
    auto it = index_.find(h);
    return it == index_.end() ? nullptr : &*it->second;
  }
  /// Removes the record with this hash and returns it; nullopt on a miss.
  std::optional<host_record> take(const block_hash& h);
  bool contains(const block_hash& h) const { return index_.contains(h); }
  /// Drops every record; returns them.
  std::vector<host_record> clear();

  std::int64_t budget() const { return budget_; }
  std::int64_t bytes() const { return bytes_; }
  std::size_t size() const { return index_.size(); }
  const host_store_stats& stats() const { return stats_; }

 private:
  static std::int64_t cost(const host_record& r) { return static_cast<std::int64_t>(r.bytes.size()); }

  std::int64_t budget_ = 0;
  std::int64_t bytes_ = 0;
  std::list<host_record> lru_;  // front: least recently used
  std::unordered_map<block_hash, std::list<host_record>::iterator, block_hash_hasher> index_;
  host_store_stats stats_;
};

}  // namespace strata::kv
