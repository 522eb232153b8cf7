#include "actors/scheduler/deferred_saves.hpp"

#include <algorithm>
#include <iterator>

namespace strata::sched {

void deferred_saves::add(save_item item) {
  if (!hashes_.insert(item.hash).second) return;
  items_.push_back(std::move(item));
}

std::vector<save_item> deferred_saves::take(const kv::block_pool& pool, std::int64_t max_bytes, std::vector<kv::block_hash>& lost) {
  std::vector<save_item> out;
  std::int64_t bytes = 0;
  std::size_t n = 0;
  for (; n < items_.size(); ++n) {
    save_item& item = items_[n];
    // The step this save rides on copies the block out before it computes anything.
    auto block = pool.find(item.hash);
    const std::int64_t cost = block ? pool.block_bytes(pool.format_of(*block)) : 0;
    if (block && !out.empty() && bytes + cost > max_bytes) break;
    hashes_.erase(item.hash);
    if (!block) {
      lost.push_back(item.hash);
      continue;
    }
    bytes += cost;
    item.block = *block;
    out.push_back(std::move(item));
  }
  items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

void deferred_saves::prune(const kv::block_pool& pool, std::vector<kv::block_hash>& lost) {
  if (items_.size() <= static_cast<std::size_t>(pool.capacity())) return;
  std::erase_if(items_, [&](const save_item& item) {
    if (pool.contains(item.hash)) return false;
    lost.push_back(item.hash);
    hashes_.erase(item.hash);
    return true;
  });
}

}  // namespace strata::sched
