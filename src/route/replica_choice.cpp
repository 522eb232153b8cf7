#include "src/route/replica_choice.hpp"

#include <algorithm>
#include <limits>

namespace strata::route {

std::int32_t cached_prefix(const std::vector<std::vector<std::string>>& holders, const std::string& url) {
  std::int32_t n = 0;
  for (const auto& h : holders) {
    if (std::find(h.begin(), h.end(), url) == h.end()) break;
    ++n;
  }
  return n;
}

choice choose_replica(const std::vector<replica_state>& replicas, const std::vector<std::vector<std::string>>& holders,
                      int after, choice_options opts) {
  std::int32_t least = std::numeric_limits<std::int32_t>::max();
  for (const auto& r : replicas)
    if (r.alive) least = std::min(least, r.in_flight);
  choice best;
  std::int32_t best_load = 0;
  const int n = static_cast<int>(replicas.size());
  // In round-robin order from the one after the last choice, so that the first of equals rotates.
  for (int k = 1; k <= n; ++k) {
    const int i = ((after < 0 ? -1 : after) + k) % n;
    const replica_state& r = replicas[static_cast<std::size_t>(i)];
    if (!r.alive || r.in_flight > least + opts.slack) continue;
    const std::int32_t prefix = cached_prefix(holders, r.url);
    const bool better = best.replica < 0 || prefix > best.cached_blocks || (prefix == best.cached_blocks && r.in_flight < best_load);
    if (better) {
      best = {i, prefix};
      best_load = r.in_flight;
    }
  }
  return best;
}

}  // namespace strata::route
