#pragma once
// Messages of the cluster directory: the scheduler's block batches (kv_events::block_batch), the
// start with this replica's URL, the refresh tick, and lookups.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "actors/kv_events/messages.hpp"
#include "actors/runtime/address.hpp"
#include "actors/runtime/port.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::directory {

/// Starts publishing: the URL other replicas and the router reach this one at.
struct start {
  std::string url;
};

/// Time to rewrite every entry this replica holds, before its TTL runs out.
struct refresh_tick {};

/// Who holds each block of a chain, as the directory says now.
struct lookup_result {
  std::uint64_t id = 0;
  /// holders[i]: the URLs of the live replicas listing block i (this one included, if it does).
  std::vector<std::vector<std::string>> holders;
};

/// Which replicas hold the blocks of `chain` (in chain order, in format `format`)?
struct lookup {
  std::uint64_t id = 0;
  kv::kv_format format = kv::kv_format::f16;
  std::vector<kv::block_hash> chain;
  actors::port<lookup_result> reply_to;
};

using inbox = std::variant<kv_events::block_batch, start, refresh_tick, lookup>;
using address = actors::address<inbox>;

}  // namespace strata::directory
