#pragma once
// Frozen boundary snapshots: what a model keeps beyond its attention KV (a recurrent layer's
// state; a sliding-window layer's window) cannot be cut back to a block boundary, so a sequence of
// such a model can resume only where a copy of that state was taken. At chosen block boundaries
// each layer copies its part of a sequence's state out, by value, into an immutable snapshot
// keyed by the chain hash of the block that ends there. The kv_cache_manager keeps them here;
// their bytes hang on that block in the pool (block_pool::attach), so they count against the hot
// tier's budget with the blocks and age with their block in the same LRU, and a snapshot goes when
// its block is evicted: its boundary is no longer a resume point.
//
// The payload is opaque: one byte range per layer (empty for a layer without such state), which
// only that layer's actor writes and reads.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "src/kv/prefix_hash.hpp"

namespace strata::kv {

/// One sequence's state at a block boundary, over every layer.
struct state_snapshot {
  std::vector<std::vector<std::byte>> layers;
  std::int64_t bytes() const {
    std::int64_t n = 0;
    for (const auto& l : layers) n += static_cast<std::int64_t>(l.size());
    return n;
  }
};

/// A snapshot as the SSD tier stores it: the layer count (u64), each layer's byte count (u64),
/// then the layers' bytes one after the other. Little-endian.
std::vector<std::byte> encode_snapshot(const state_snapshot& s);
/// The snapshot `bytes` encode, or nullopt when they do not add up to one.
std::optional<state_snapshot> decode_snapshot(std::span<const std::byte> bytes);

/// The key the SSD tier keeps the snapshot at the end of block `h` under: h with a fixed mask in
/// its first word, so that the block and its snapshot live side by side. Its own inverse.
inline block_hash snapshot_key(const block_hash& h) {
  block_hash k = h;
  k.w[0] ^= 0x736e'6170'7368'6f74ull;  // "snapshot"
  return k;
}

/// Where snapshots are taken: at every `every`-th block boundary of a sequence, at the last block
/// boundary of its prompt (so the next chat turn, which repeats the prompt, resumes there), and at
/// the last block boundary of its reply (see in_reply).
struct snapshot_policy {
  /// The model keeps state that cannot be sliced: a sequence resumes only from a snapshot.
  bool on = false;
  std::int32_t block_tokens = 32;
  /// Blocks between snapshots (0: only at the end of each prompt).
  std::int32_t every = 0;

  /// Whether a sequence with n_prompt prompt tokens takes a snapshot after position end - 1.
  bool at(std::int32_t end, std::int32_t n_prompt) const {
    if (!on || end <= 0 || end % block_tokens != 0) return false;
    return (every > 0 && (end / block_tokens) % every == 0) || end == n_prompt / block_tokens * block_tokens ||
           in_reply(end, n_prompt);
  }
  /// Whether the snapshot after position end - 1 falls in the reply (past the prompt), off the
  /// every-th boundaries. Of those a sequence keeps only its latest, and the cache takes it when
  /// the sequence lets go: the next chat turn, which repeats the reply, resumes at the reply's last
  /// boundary instead of recomputing the reply from the prompt's end.
  bool in_reply(std::int32_t end, std::int32_t n_prompt) const {
    return on && end > n_prompt && end % block_tokens == 0 && !(every > 0 && (end / block_tokens) % every == 0);
  }
  /// The first snapshot point after `from` (a chunk starting there ends there at the latest).
  std::int32_t next_after(std::int32_t from, std::int32_t n_prompt) const {
    std::int32_t next = std::numeric_limits<std::int32_t>::max();
    if (!on) return next;
    if (every > 0) next = (from / (every * block_tokens) + 1) * (every * block_tokens);
    const std::int32_t prompt_end = n_prompt / block_tokens * block_tokens;
    if (prompt_end > from && prompt_end < next) next = prompt_end;
    return next;
  }
};

/// The snapshot figures the metrics and /admin/api/stats report.
struct snapshot_stats {
  std::int64_t count = 0;
  std::int64_t bytes = 0;
  /// Snapshots taken (kept), and sequences that resumed from one.
  std::uint64_t taken = 0;
  std::uint64_t restores = 0;
  /// Tokens those sequences did not compute thanks to it.
  std::uint64_t hit_tokens = 0;
};

class snapshot_index {
 public:
  bool contains(const block_hash& h) const { return map_.contains(h); }
  const state_snapshot* find(const block_hash& h) const {
    auto it = map_.find(h);
    return it == map_.end() ? nullptr : &it->second;
  }
  /// Keeps s under h (a second one for the same hash is dropped); false if one was there.
  bool insert(const block_hash& h, state_snapshot s);
  /// Forgets the snapshot under h, if any.
  void erase(const block_hash& h);
  /// A sequence resumed from a snapshot, skipping `tokens` tokens.
  void count_restore(std::int32_t tokens) {
    ++stats_.restores;
    stats_.hit_tokens += static_cast<std::uint64_t>(tokens);
  }
  const snapshot_stats& stats() const { return stats_; }

 private:
  std::unordered_map<block_hash, state_snapshot, block_hash_hasher> map_;
  snapshot_stats stats_;
};

}  // namespace strata::kv
