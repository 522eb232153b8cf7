#pragma once
// fetch_actor: brings KV blocks this replica lacks from the replicas that hold them, by value.
// The scheduler's cache manager orders the full blocks after the chain its RAM and SSD tiers
// hold (a remote restore order); this actor asks the cluster directory who holds each, fetches
// the leading run that some other replica holds over HTTP (GET /internal/kv/{hash}, from one
// holder where it can), checks every record (wire_record.hpp: checksums, model fingerprint, KV
// format, hash, size) and answers the scheduler as the SSD store answers a restore: one payload
// per block, empty for a miss. The scheduler imports the run that came back from the start and
// computes the rest. A small block's record may be in Redis itself (the directory's lookup
// brings it along): it is checked the same way and no replica is asked for it.
//
// Failure is a miss, never a wrong block and never a wait past the deadline: a replica that is
// gone, slow, answers 404 or anything that fails a check leaves its block (and so the chain from
// there) to be computed; Redis down leaves the whole order a miss. The order is answered by its
// deadline (`timeout` from its arrival) with whatever came back by then.
// Who sends to it: the scheduler (fetch), the engine (start), the directory (lookup_result), and
// itself (fetched, expired).

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "actors/kv_fetch/messages.hpp"
#include "actors/runtime/actor.hpp"
#include "src/common/metrics.hpp"

namespace strata::kv_fetch {

struct fetch_options {
  /// The model fingerprint every record must carry.
  std::array<std::uint64_t, 2> model{};
  /// Sent as a bearer token to the other replicas (theirs, when they require one).
  std::string api_key;
  /// From an order's arrival to its answer, whatever is still out.
  std::chrono::milliseconds timeout{1000};
  /// The largest record accepted from another replica (its body is read no further).
  std::uint64_t max_record_bytes = 64ull << 20;
  /// Who says which replica holds what.
  actors::port<directory::lookup> directory;
};

/// Counters of the remote tier (registered by create()).
struct fetch_metrics {
  metrics::counter* blocks = nullptr;
  metrics::counter* bytes = nullptr;
  metrics::counter* failures = nullptr;
  /// Of the records received, those read from Redis itself.
  metrics::counter* redis_blocks = nullptr;
  metrics::histogram* seconds = nullptr;
  static fetch_metrics create(metrics::registry& r);
};

/// For each block of a chain from its start, the replica to fetch it from, as long as a replica
/// other than `self` holds it: the holder of the first block that holds the longest run from
/// there, else, block by block, the first other holder listed. Stops at the first block no other
/// replica holds (the chain cannot go on past it).
std::vector<std::string> pick_sources(const std::vector<std::vector<std::string>>& holders, const std::string& self);

class fetch_actor final : public actors::actor<inbox> {
 public:
  fetch_actor(fetch_options opts, fetch_metrics m);

  void receive(inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(fetch f);
  void handle(start s) { url_ = std::move(s.url); }
  void handle(directory::lookup_result r);
  void handle(fetched f);
  void handle(expired e);
  void on_stop() override;

 private:
  struct order_state {
    fetch asked;
    std::vector<std::optional<std::vector<std::byte>>> payloads;
    std::size_t pending = 0;
    bool fetching = false;  // some block was asked of a replica (the latency is observed)
    std::chrono::steady_clock::time_point arrived;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  /// Answers the order with what it has and forgets it.
  void answer(std::uint64_t order);

  fetch_options opts_;
  fetch_metrics metrics_;
  std::string url_;
  std::unordered_map<std::uint64_t, order_state> orders_;
};

}  // namespace strata::kv_fetch
