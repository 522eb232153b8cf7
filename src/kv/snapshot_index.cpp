#include "src/kv/snapshot_index.hpp"

#include <cstring>
#include <utility>

namespace strata::kv {

std::vector<std::byte> encode_snapshot(const state_snapshot& s) {
  std::vector<std::byte> out((1 + s.layers.size()) * sizeof(std::uint64_t) + static_cast<std::size_t>(s.bytes()));
  std::byte* p = out.data();
  auto put = [&p](std::uint64_t v) {
    std::memcpy(p, &v, sizeof v);
    p += sizeof v;
  };
  put(s.layers.size());
  for (const auto& l : s.layers) put(l.size());
  for (const auto& l : s.layers) {
    if (!l.empty()) std::memcpy(p, l.data(), l.size());
    p += l.size();
  }
  return out;
}

std::optional<state_snapshot> decode_snapshot(std::span<const std::byte> bytes) {
  auto get = [&bytes](std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at * sizeof v, sizeof v);
    return v;
  };
  if (bytes.size() < sizeof(std::uint64_t)) return std::nullopt;
  const std::uint64_t n = get(0);
  if (n > bytes.size() / sizeof(std::uint64_t) - 1) return std::nullopt;
  std::size_t at = (1 + n) * sizeof(std::uint64_t);
  state_snapshot s;
  s.layers.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t len = get(1 + i);
    if (len > bytes.size() - at) return std::nullopt;
    s.layers[i].assign(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
  if (at != bytes.size()) return std::nullopt;
  return s;
}

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
