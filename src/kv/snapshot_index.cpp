#include "src/kv/snapshot_index.hpp"

#include <utility>

namespace strata::kv {

bool snapshot_index::insert(const block_hash& h, state_snapshot s) {
  const std::int64_t n = s.bytes();
  if (!map_.emplace(h, std::move(s)).second) return false;
  ++stats_.count;
  stats_.bytes += n;
  ++stats_.taken;
  return true;
}

void snapshot_index::erase(const block_hash& h) {
  auto it = map_.find(h);
  if (it == map_.end()) return;
  --stats_.count;
  stats_.bytes -= it->second.bytes();
  map_.erase(it);
}

}  // namespace strata::kv
