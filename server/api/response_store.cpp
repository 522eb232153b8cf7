#include "server/api/response_store.hpp"

#include <boost/json/serialize.hpp>

namespace strata::api {

void response_store::put(const std::string& id, entry e) {
  const std::size_t bytes = id.size() + e.response_json.size() + boost::json::serialize(e.conversation).size();
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) drop(it);
  if (bytes > max_bytes_ || max_count_ == 0) return;
  while (!oldest_first_.empty() && (entries_.size() + 1 > max_count_ || bytes_ + bytes > max_bytes_))
    drop(entries_.find(oldest_first_.front()));
  oldest_first_.push_back(id);
  entries_.emplace(id, slot{std::move(e), bytes, std::prev(oldest_first_.end())});
  bytes_ += bytes;
}

std::optional<response_store::entry> response_store::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.e;
}

bool response_store::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  drop(it);
  return true;
}

std::size_t response_store::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::size_t response_store::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

void response_store::drop(std::unordered_map<std::string, slot>::iterator it) {
  bytes_ -= it->second.bytes;
  oldest_first_.erase(it->second.age);
  entries_.erase(it);
}

}  // namespace strata::api
