#include "io/kv_events/vllm_format.hpp"

#include <cstring>

#include "io/kv_events/msgpack_writer.hpp"

namespace strata::kv_events {
namespace {

using kind = kv::block_event::kind;

void write_hash(msgpack_writer& w, const kv::block_hash& h) {
  std::byte b[32];
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t k = 0; k < 8; ++k) b[8 * i + k] = static_cast<std::byte>((h.w[i] >> (8 * k)) & 0xff);
  }
  w.bin(b);
}

/// Whether event b can join the event a run starts with (last: the run's last event).
bool joins(const kv::block_event& first, const kv::block_event& last, const kv::block_event& b, pool_memory pool) {
  if (b.what != first.what || medium_of(b.tier, pool) != medium_of(first.tier, pool)) return false;
  if (b.what == kind::removed) return true;
  return b.what == kind::stored && b.parent && *b.parent == last.hash;
}

}  // namespace

pool_memory pool_memory_of(std::string_view device) { return device == "cuda" ? pool_memory::gpu : pool_memory::host; }

std::string_view medium_of(kv::kv_tier t, pool_memory pool) {
  switch (t) {
    case kv::kv_tier::ram:
      return pool == pool_memory::gpu ? "GPU" : "CPU";
    case kv::kv_tier::host:
      return "CPU";
    case kv::kv_tier::ssd:
      return "DISK";
  }
  return "DISK";
}

std::vector<kv::block_event> medium_merge::filter(std::vector<kv::block_event> events) {
  if (pool_ == pool_memory::gpu) return events;
  auto shared = [](kv::kv_tier t) { return t == kv::kv_tier::ram || t == kv::kv_tier::host; };
  std::vector<kv::block_event> out;
  out.reserve(events.size());
  for (auto& e : events) {
    if (e.what == kind::cleared) {
      held_.clear();
    } else if (shared(e.tier)) {
      const auto bit = static_cast<std::uint8_t>(1u << static_cast<unsigned>(e.tier));
      if (e.what == kind::stored) {
        std::uint8_t& tiers = held_[e.hash];
        const bool first = tiers == 0;
        tiers |= bit;
        if (!first) continue;
      } else {
        auto it = held_.find(e.hash);
        if (it == held_.end() || (it->second & bit) == 0) continue;  // never reported stored there
        it->second &= static_cast<std::uint8_t>(~bit);
        if (it->second != 0) continue;
        held_.erase(it);
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string encode_batch(double ts, std::span<const kv::block_event> events, std::int32_t block_size, pool_memory pool) {
  // Runs of events that merge into one wire event.
  std::vector<std::span<const kv::block_event>> runs;
  for (std::size_t i = 0; i < events.size();) {
    std::size_t j = i + 1;
    while (events[i].what != kind::cleared && j < events.size() && joins(events[i], events[j - 1], events[j], pool)) ++j;
    runs.push_back(events.subspan(i, j - i));
    i = j;
  }
  msgpack_writer w;
  w.array(2);
  w.float64(ts);
  w.array(runs.size());
  for (const auto& run : runs) {
    const kv::block_event& e = run.front();
    switch (e.what) {
      case kind::cleared:
        w.array(1);
        w.str("AllBlocksCleared");
        break;
      case kind::removed:
        w.array(3);
        w.str("BlockRemoved");
        w.array(run.size());
        for (const auto& r : run) write_hash(w, r.hash);
        w.str(medium_of(e.tier, pool));
        break;
      case kind::stored: {
        w.array(7);
        w.str("BlockStored");
        w.array(run.size());
        for (const auto& r : run) write_hash(w, r.hash);
        if (e.parent) write_hash(w, *e.parent);
        else w.nil();
        std::size_t n = 0;
        for (const auto& r : run) n += r.token_ids.size();
        w.array(n);
        for (const auto& r : run)
          for (auto t : r.token_ids) w.integer(t);
        w.integer(block_size);
        w.nil();
        w.str(medium_of(e.tier, pool));
        break;
      }
    }
  }
  return w.take();
}

}  // namespace strata::kv_events
