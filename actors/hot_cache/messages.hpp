#pragma once
// Messages of the hot_cache actor: the scheduler reports pressure on the KV pool, the actor
// answers with the blocks to evict.

#include <cstdint>
#include <variant>
#include <vector>

#include "actors/runtime/address.hpp"
#include "actors/runtime/port.hpp"

namespace strata::hot_cache {

/// A cached block the scheduler could evict: least recently used first in a pressure report.
struct candidate {
  std::int32_t block = -1;
  std::int64_t bytes = 0;
  /// Its KV is on the SSD already (or needs no copy there): evicting it spills nothing.
  bool persisted = false;
};

/// The blocks to evict now, ahead of need.
struct reclaim {
  std::vector<std::int32_t> blocks;
};

/// From the scheduler's cache manager, when the pool's free bytes fell below the low watermark.
struct pressure {
  std::int64_t free_bytes = 0;
  std::int64_t budget = 0;
  std::vector<candidate> candidates;
  actors::port<reclaim> reply_to;
};

using inbox = std::variant<pressure>;
using address = actors::address<inbox>;

struct watermarks {
  /// Fractions of the pool's byte budget kept free: act below `low`, reclaim up to `high`.
  /// low = 0 turns the background reclaim off (eviction happens only inside allocation).
  double low = 0.02;
  double high = 0.05;
};

}  // namespace strata::hot_cache
