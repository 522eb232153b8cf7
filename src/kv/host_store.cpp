#include "src/kv/host_store.hpp"

#include <utility>

namespace strata::kv {

std::vector<host_record> host_store::put(host_record r) {
  std::vector<host_record> out;
  if (cost(r) > budget_) {
    ++stats_.refused;
    out.push_back(std::move(r));
    return out;
  }
  if (auto it = index_.find(r.hash); it != index_.end()) {
    bytes_ -= cost(*it->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
  bytes_ += cost(r);
  const block_hash h = r.hash;
  lru_.push_back(std::move(r));
  index_[h] = std::prev(lru_.end());
  ++stats_.stored;
  while (bytes_ > budget_) {
    host_record& oldest = lru_.front();
    bytes_ -= cost(oldest);
    index_.erase(oldest.hash);
    out.push_back(std::move(oldest));
    lru_.pop_front();
    ++stats_.evictions;
  }
  return out;
}

const host_record* host_store::get(const block_hash& h) {
  auto it = index_.find(h);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.end(), lru_, it->second);
  return &*it->second;
}

std::optional<host_record> host_store::take(const block_hash& h) {
  auto it = index_.find(h);
  if (it == index_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  host_record r = std::move(*it->second);
  bytes_ -= cost(r);
  lru_.erase(it->second);
  index_.erase(it);
  return r;
}

std::vector<host_record> host_store::clear() {
  std::vector<host_record> out;
  out.reserve(lru_.size());
  for (auto& r : lru_) out.push_back(std::move(r));
  lru_.clear();
  index_.clear();
  bytes_ = 0;
  return out;
}

}  // namespace strata::kv
