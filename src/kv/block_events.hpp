#pragma once
// block_events: what the KV cache manager tells an observer about the blocks it holds, for those
// outside the scheduler who track them (the KV-event publisher, the cluster directory). One narrow
// hook: the manager calls on_block() as a full block becomes findable by its hash in a tier
// (stored), stops being findable there (removed), or the whole cache is dropped (cleared). Tails
// (partial blocks) are not reported: only full blocks are shared across replicas.

#include <cstdint>
#include <optional>
#include <vector>

#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::kv {

/// Where a block is held: the KV pool (the hot tier: RAM on the CPU, HBM on the GPU), the host
/// tier (frozen copies in host memory, under the pool) or the SSD tier. Each tier's events stand
/// alone: a block may be held in several at once, and leaves each one by its own removed event.
enum class kv_tier : std::uint8_t { ram, ssd, host };

/// One change to the set of blocks a cache holds.
struct block_event {
  enum class kind : std::uint8_t { stored, removed, cleared };
  kind what = kind::stored;
  kv_tier tier = kv_tier::ram;
  block_hash hash;
  /// The hash of the block before it in its chain; empty for a chain's first block (and for SSD
  /// records whose parent is not known here). Removed events carry none.
  std::optional<block_hash> parent;
  /// The block's token ids when known (a RAM block as it is stored, a host block whose tokens RAM
  /// still listed); empty otherwise.
  std::vector<std::int32_t> token_ids;
  kv_format format = kv_format::f16;
};

/// Told of every block_event, synchronously, on the manager's owner's thread.
class block_observer {
 public:
  virtual ~block_observer() = default;
  virtual void on_block(block_event e) = 0;
};

}  // namespace strata::kv
