#pragma once
// Messages of the KV-event publisher: block events the scheduler's cache manager reported, one
// batch per scheduler step. The cluster directory takes the same message.

#include <variant>
#include <vector>

#include "actors/runtime/address.hpp"
#include "actors/runtime/port.hpp"
#include "src/kv/block_events.hpp"

namespace strata::kv_events {

/// The block events of one step, in the order they happened.
struct block_batch {
  std::vector<kv::block_event> events;
};

using inbox = std::variant<block_batch>;
using address = actors::address<inbox>;
/// Where the scheduler sends its batches (the publisher, the directory).
using batch_port = actors::port<block_batch>;

}  // namespace strata::kv_events
