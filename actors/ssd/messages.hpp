#pragma once
// Messages the SSD store receives.

#include <cstdint>
#include <variant>
#include <vector>

#include "actors/runtime/address.hpp"
#include "actors/scheduler/messages.hpp"
#include "io/ssd/segment_store.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::ssd {

/// Write one record, moved in: a block's frozen KV over every layer (pipeline::frozen_block's
/// layout), or a snapshot (meta.kind; kv::encode_snapshot's layout).
struct persist {
  record_meta meta;
  std::vector<std::byte> payload;
};

/// Read these records back (by record_key: a block's hash, or snapshot_key for a snapshot); answered with one sched::ssd_loaded carrying `order`.
struct load {
  std::uint64_t order = 0;
  std::vector<kv::block_hash> hashes;
};

/// The ring's eventfd is readable (sent by the store to itself), or the store should arm it.
struct ring_ready {};

/// While the tier is degraded, sent by the store to itself once a second: time to look for free
/// space, so that writing resumes even when no write comes to try.
struct space_check {};

/// Where the store's answers go from now on (the scheduler, spawned after the store because it
/// needs the store's address).
struct attach {
  sched::scheduler_address scheduler;
};

/// From the admin API: delete every record (segment_store::clear); the scheduler hears of each
/// through the usual ssd_update.removed.
struct clear {};

/// From the scheduler: read the record with this key (record_key) for another replica, and hand
/// it to `done` as a wire record (ssd::encode_wire_record), or nullopt when it is not held or
/// fails its checks.
struct export_record {
  kv::block_hash key;
  sched::export_done done;
};

using store_inbox = std::variant<persist, load, ring_ready, space_check, attach, clear, export_record>;
using store_address = actors::address<store_inbox>;

}  // namespace strata::ssd
