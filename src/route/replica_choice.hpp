#pragma once
// replica_choice: which replica `strata route` sends a request to. The directory says, for each
// block of the request's prompt chain, which replicas hold it; a replica's cached prefix is the
// run of blocks from the first that it holds (a block past a gap is no use: the chain must be
// whole). The replica with the longest cached prefix wins, unless it is busier than the least
// busy live replica by more than `slack` requests in flight: then load wins, since a queue costs
// more than recomputing (or, with remote blocks, fetching) a prefix. Ties go to the less busy,
// then to the one after the last choice (round robin), so equal replicas share the work.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::route {

struct replica_state {
  std::string url;
  /// Answering (its last request or health check did not fail).
  bool alive = true;
  /// Requests the router has sent it that have not ended.
  std::int32_t in_flight = 0;
};

struct choice_options {
  /// How many more requests in flight than the least busy replica the best prefix may have.
  std::int32_t slack = 4;
};

struct choice {
  /// Index into the replicas; -1 when none is alive.
  int replica = -1;
  /// Blocks of the prompt the chosen replica holds, from the first on.
  std::int32_t cached_blocks = 0;
};

/// The blocks of the chain, from the first on, that `url` holds (holders[i]: the URLs of block i).
std::int32_t cached_prefix(const std::vector<std::vector<std::string>>& holders, const std::string& url);

/// Picks a replica for a request whose chain has `holders` (see the header comment); `after`: the
/// index chosen last time, where the round robin goes on from.
choice choose_replica(const std::vector<replica_state>& replicas, const std::vector<std::vector<std::string>>& holders,
                      int after = -1, choice_options opts = {});

}  // namespace strata::route
