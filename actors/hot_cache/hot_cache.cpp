#include "actors/hot_cache/hot_cache.hpp"

#include <algorithm>

namespace strata::hot_cache {

std::vector<std::int32_t> choose_victims(const pressure& p, const watermarks& w) {
  const auto budget = static_cast<double>(p.budget);
  if (static_cast<double>(p.free_bytes) >= w.low * budget) return {};  // stale: room came back
  std::int64_t need = static_cast<std::int64_t>(w.high * budget) - p.free_bytes;
  std::vector<std::int32_t> victims;
  // Persisted blocks first, each group oldest first: the order of the report.
  for (bool persisted : {true, false}) {
    for (const auto& c : p.candidates) {
      if (need <= 0) return victims;
      if (c.persisted != persisted) continue;
      victims.push_back(c.block);
      need -= c.bytes;
    }
  }
  return victims;
}

void hot_cache::handle(pressure p) {
  auto victims = choose_victims(p, marks_);
  // Answered even when empty: the scheduler sends the next report only after an answer.
  p.reply_to.tell(reclaim{std::move(victims)});
}

}  // namespace strata::hot_cache
