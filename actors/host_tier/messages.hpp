#pragma once
// Messages the host tier receives.

#include <array>
#include <cstdint>
#include <variant>
#include <vector>

#include "actors/runtime/address.hpp"
#include "actors/scheduler/messages.hpp"
#include "src/kv/host_store.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::host_tier {

/// Keep this frozen block (moved in: its bytes were copied out of the layers by value).
struct store {
  kv::host_record record;
};

/// Read these blocks back, by hash; answered with one sched::ssd_loaded carrying `order`: each
/// block it holds, which leaves the tier (empty where it lacks one).
struct load {
  std::uint64_t order = 0;
  std::vector<kv::block_hash> hashes;
};

/// Copy the block with this hash out for another replica (GET /internal/kv), by value, as a wire
/// record (io/ssd/wire_record.hpp) handed to `done`; the block stays in the tier. One it lacks
/// (evicted meanwhile, its notice on the way) is asked of the SSD store where there is one (it
/// may have been passed on there), else `done` gets nullopt. `model`: the fingerprint the record
/// carries.
struct export_record {
  kv::block_hash hash;
  std::array<std::uint64_t, 2> model{};
  sched::export_done done;
};

/// Drop every block (the prefix cache was turned off); the scheduler hears of each through
/// host_update.dropped.
struct clear {};

/// Where the tier's answers go from now on (the scheduler, spawned after it because it needs the
/// tier's address).
struct attach {
  sched::scheduler_address scheduler;
};

using inbox = std::variant<store, load, clear, attach, export_record>;
using address = actors::address<inbox>;

}  // namespace strata::host_tier
