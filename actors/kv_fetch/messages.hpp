#pragma once
// Messages of the remote fetch actor: the scheduler's remote orders, this replica's URL, the
// directory's answers, and its own fetches as they finish.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/directory/messages.hpp"
#include "actors/runtime/address.hpp"
#include "actors/runtime/port.hpp"
#include "actors/scheduler/messages.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::kv_fetch {

/// Fetch these blocks (in chain order, in format `format`, each `block_bytes` of KV) from the
/// replicas the directory names; answered with one sched::ssd_loaded carrying `order`, one entry
/// per hash (empty where none came back verified), within the fetch timeout.
struct fetch {
  std::uint64_t order = 0;
  kv::kv_format format = kv::kv_format::f16;
  std::int64_t block_bytes = 0;
  std::vector<kv::block_hash> hashes;
  actors::port<sched::ssd_loaded> reply_to;
};

/// This replica's own URL, as the directory lists it (skipped among the holders).
struct start {
  std::string url;
};

/// One block's fetch is over: its KV payload, checked, or nothing (a miss).
struct fetched {
  std::uint64_t order = 0;
  std::size_t index = 0;
  std::optional<std::vector<std::byte>> payload;
  /// Bytes that came over the network for it, checked or not.
  std::uint64_t bytes = 0;
};

/// An order's time is up: answer with what came back.
struct expired {
  std::uint64_t order = 0;
};

using inbox = std::variant<fetch, start, directory::lookup_result, fetched, expired>;
using address = actors::address<inbox>;

}  // namespace strata::kv_fetch
