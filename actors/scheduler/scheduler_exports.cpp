// scheduler_actor's exports: blocks copied out by value for another replica (GET /internal/kv).
// A block in RAM is pinned (it keeps its hash and its pages), copied out of the layers with the
// next step like a save, then sent as a wire record; one the RAM tier lacks is asked of the host
// tier (its frozen copy, no step needed), else of the SSD tier; either answers the caller itself.

#include <algorithm>

#include "actors/scheduler/scheduler_actor.hpp"
#include "io/ssd/wire_record.hpp"

namespace strata::sched {

void scheduler_actor::handle(export_block e) {
  if (!e.snapshot) {
    if (auto block = cache_.pin(e.hash)) {
      const kv::kv_format f = cache_.pool().format_of(*block);
      exports_queued_.push_back(pending_export{*block, e.hash, f, std::move(e.done)});
      maybe_step();
      return;
    }
  }
  if (!e.snapshot && cfg_.host && cache_.on_host(e.hash)) {
    auto done = e.done;  // kept for the answer, should the tier be gone
    if (!cfg_.host->tell(host_tier::export_record{e.hash, cfg_.planner.cache_ns.model, std::move(e.done)})) done(std::nullopt);
    return;
  }
  const bool on_ssd = e.snapshot ? cache_.snapshot_on_ssd(e.hash) : cache_.on_ssd(e.hash);
  if (cfg_.ssd && on_ssd) {
    const kv::block_hash key = e.snapshot ? kv::snapshot_key(e.hash) : e.hash;
    auto done = e.done;  // kept for the answer, should the store be gone
    if (!cfg_.ssd->tell(ssd::export_record{key, std::move(e.done)})) done(std::nullopt);
    return;
  }
  e.done(std::nullopt);
}

void scheduler_actor::add_exports(pipeline::batch_layout& layout) {
  auto loaded = [&](std::int32_t block) {
    return std::any_of(layout.load.begin(), layout.load.end(), [&](const pipeline::frozen_block& b) { return b.block == block; });
  };
  std::vector<pending_export> later;
  for (auto& e : std::exchange(exports_queued_, {})) {
    if (loaded(e.block)) {
      later.push_back(std::move(e));
      continue;
    }
    layout.save.push_back(e.block);
    exports_in_flight_.push_back(std::move(e));
  }
  exports_queued_ = std::move(later);
}

void scheduler_actor::finish_exports(std::vector<pipeline::frozen_block> copies) {
  auto in_flight = std::exchange(exports_in_flight_, {});
  for (std::size_t i = 0; i < in_flight.size(); ++i) {
    pending_export& e = in_flight[i];
    std::optional<std::vector<std::byte>> wire;
    if (i < copies.size() && copies[i].block == e.block &&
        static_cast<std::int64_t>(copies[i].bytes.size()) == cache_.pool().block_bytes(e.format)) {
      ssd::record_meta meta;
      meta.hash = e.hash;
      meta.format = e.format;
      meta.tokens = cfg_.planner.block_tokens;
      meta.layers = cfg_.n_layers;
      wire = ssd::encode_wire_record(meta, cfg_.planner.cache_ns.model, copies[i].bytes);
    }
    e.done(std::move(wire));
    cache_.unpin(e.block);
  }
}

}  // namespace strata::sched
