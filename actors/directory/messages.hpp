#pragma once
// Messages of the cluster directory: the scheduler's block batches (kv_events::block_batch), the
// start with this replica's URL, the refresh tick, and lookups.

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/kv_events/messages.hpp"
#include "actors/runtime/address.hpp"
#include "actors/runtime/port.hpp"
#include "actors/scheduler/messages.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::directory {

/// Starts publishing: the URL other replicas and the router reach this one at, and who copies a
/// block out (the scheduler) for the records kept in Redis itself (directory_options::value_max).
struct start {
  std::string url;
  actors::port<sched::export_block> exporter;
};

/// A block's wire record, copied out for Redis (nullopt: RAM no longer held it).
struct value_ready {
  kv::block_hash hash;
  std::optional<std::vector<std::byte>> record;
};

/// Time to rewrite every entry this replica holds, before its TTL runs out.
struct refresh_tick {};

/// Who holds each block of a chain, as the directory says now.
struct lookup_result {
  std::uint64_t id = 0;
  /// holders[i]: the URLs of the live replicas listing block i (this one included, if it does).
  std::vector<std::vector<std::string>> holders;
  /// values[i]: block i's wire record as Redis keeps it (directory_options::value_max), or empty.
  std::vector<std::string> values;
};

/// Which replicas hold the blocks of `chain` (in chain order, in format `format`)?
struct lookup {
  std::uint64_t id = 0;
  kv::kv_format format = kv::kv_format::f16;
  std::vector<kv::block_hash> chain;
  actors::port<lookup_result> reply_to;
};

using inbox = std::variant<kv_events::block_batch, start, refresh_tick, lookup, value_ready>;
using address = actors::address<inbox>;

}  // namespace strata::directory
