#include "actors/host_tier/host_tier.hpp"

#include <chrono>

#include <spdlog/spdlog.h>

#include "io/ssd/wire_record.hpp"
#include "src/common/block_buffers.hpp"

namespace strata::host_tier {

tier_metrics tier_metrics::create(metrics::registry& r) {
  tier_metrics m;
  m.blocks = &r.make_gauge("strata_host_blocks", "KV blocks kept in the host tier (frozen copies in host memory).");
  m.bytes = &r.make_gauge("strata_host_bytes", "Bytes of the KV blocks kept in the host tier (within cache.host_memory).");
  m.stored = &r.make_counter("strata_host_stored_total", "KV blocks evicted from the KV pool and kept in the host tier.");
  m.hits = &r.make_counter("strata_host_reads_total", "KV blocks the host tier gave back for restore orders.");
  m.misses = &r.make_counter("strata_host_misses_total", "KV blocks asked of the host tier that it no longer held.");
  m.evictions = &r.make_counter("strata_host_evictions_total", "KV blocks evicted from the host tier past cache.host_memory.");
  m.spilled = &r.make_counter("strata_host_spilled_total", "Of those, the blocks passed on to the SSD tier.");
  return m;
}

host_tier::host_tier(std::int64_t budget, std::optional<ssd::store_address> ssd, std::int32_t layers,
                     std::int32_t block_tokens, tier_metrics metrics)
    : store_(budget), ssd_(std::move(ssd)), layers_(layers), block_tokens_(block_tokens), metrics_(metrics) {
  publish();
}

void host_tier::handle(store s) { evicted(store_.put(std::move(s.record)), true); }

void host_tier::handle(load l) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::optional<std::vector<std::byte>>> payloads(l.hashes.size());
  std::size_t found = 0, bytes = 0;
  for (std::size_t i = 0; i < l.hashes.size(); ++i) {
    // The block goes up with its bytes, no copy made: the pool holds it again (and saves it
    // again should it evict it).
    if (auto r = store_.take(l.hashes[i])) {
      bytes += r->bytes.size();
      payloads[i] = std::move(r->bytes);
      ++found;
    }
  }
  spdlog::debug("host tier: restore order {}: {} of {} blocks ({} MiB) handed over in {:.1f} ms", l.order, found, l.hashes.size(),
                bytes >> 20, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  scheduler_.tell(sched::ssd_loaded{l.order, std::move(payloads)});
  publish();
}

void host_tier::handle(export_record e) {
  const kv::host_record* r = store_.peek(e.hash);
  if (!r) {
    // Evicted since the scheduler looked: maybe passed on to the SSD, which answers for it then.
    auto done = e.done;  // kept for the answer, should the store be gone
    if (!ssd_ || !ssd_->tell(ssd::export_record{e.hash, std::move(e.done)})) done(std::nullopt);
    return;
  }
  ssd::record_meta meta;
  meta.hash = r->hash;
  meta.parent = r->parent;
  meta.format = r->format;
  meta.tokens = r->token_ids.empty() ? block_tokens_ : static_cast<std::int32_t>(r->token_ids.size());
  meta.token_ids = r->token_ids;
  meta.layers = layers_;
  e.done(ssd::encode_wire_record(meta, e.model, r->bytes));
}

// Cleared when the prefix cache is turned off: nothing is passed on.
void host_tier::handle(clear) { evicted(store_.clear(), false); }

void host_tier::evicted(std::vector<kv::host_record> gone, bool spill) {
  if (!gone.empty()) {
    sched::host_update u;
    u.dropped.reserve(gone.size());
    for (auto& r : gone) {
      u.dropped.push_back(r.hash);
      if (spill && r.spill && ssd_) {
        ssd::record_meta meta;
        meta.hash = r.hash;
        meta.parent = r.parent;
        meta.format = r.format;
        meta.tokens = r.token_ids.empty() ? block_tokens_ : static_cast<std::int32_t>(r.token_ids.size());
        meta.token_ids = std::move(r.token_ids);
        meta.layers = layers_;
        ssd_->tell(ssd::persist{std::move(meta), std::move(r.bytes)});
        if (metrics_.spilled) metrics_.spilled->inc();
      } else {
        block_buffers::shared().give(std::move(r.bytes));
      }
    }
    scheduler_.tell(std::move(u));
  }
  publish();
}

void host_tier::publish() {
  const kv::host_store_stats& s = store_.stats();
  auto add = [](metrics::counter* m, std::uint64_t now, std::uint64_t before) {
    if (m && now > before) m->inc(now - before);
  };
  if (metrics_.blocks) metrics_.blocks->set(static_cast<double>(store_.size()));
  if (metrics_.bytes) metrics_.bytes->set(static_cast<double>(store_.bytes()));
  add(metrics_.stored, s.stored, published_.stored);
  add(metrics_.hits, s.hits, published_.hits);
  add(metrics_.misses, s.misses, published_.misses);
  add(metrics_.evictions, s.evictions, published_.evictions);
  published_ = s;
}

}  // namespace strata::host_tier
