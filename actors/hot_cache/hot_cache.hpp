#pragma once
// hot_cache: the eviction policy of the RAM tier, run in the background as the kernel's kswapd
// runs: when the scheduler reports that the KV pool's free bytes fell below the low watermark, it
// chooses victims among the least recently used cached blocks until the high watermark would be
// reached, preferring blocks whose KV is already on the SSD (evicting them spills nothing), and
// sends them back to be evicted between steps. A request admitted later then finds free pages and
// its first step carries no spill; the pool's own eviction inside allocate() stays only as the
// fallback when demand outruns this.
// Who sends to it: the scheduler (pressure).

#include <variant>

#include "actors/hot_cache/messages.hpp"
#include "actors/runtime/actor.hpp"

namespace strata::hot_cache {

/// Chooses the victims for one pressure report (the policy, apart from the actor for tests).
std::vector<std::int32_t> choose_victims(const pressure& p, const watermarks& w);

class hot_cache final : public actors::actor<inbox> {
 public:
  explicit hot_cache(watermarks w) : marks_(w) {}

  void receive(inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(pressure p);

 private:
  watermarks marks_;
};

}  // namespace strata::hot_cache
