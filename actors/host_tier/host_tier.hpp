#pragma once
// host_tier: the tier of frozen KV blocks in host memory, under the KV pool (on the GPU, under
// HBM) and above the SSD. Owns its host_store (src/kv/host_store.hpp): blocks the pool evicted,
// copied out by value; serves restore orders with them (they leave the tier, moved into the
// answer: the pool holds them again); what it evicts past its budget goes on to the SSD store
// when the block's save asked for it, else it is dropped. A block another replica asks for is
// copied out by value into a wire record (export_record), and stays.
// Who sends to it: the scheduler (store, load, clear, attach, export_record).

#include <cstdint>
#include <optional>

#include "actors/host_tier/messages.hpp"
#include "actors/runtime/actor.hpp"
#include "actors/ssd/messages.hpp"
#include "src/common/metrics.hpp"

namespace strata::host_tier {

/// The tier's figures in the metrics registry.
struct tier_metrics {
  metrics::gauge* blocks = nullptr;
  metrics::gauge* bytes = nullptr;
  metrics::counter* stored = nullptr;
  /// Blocks read back for restore orders, and those asked for that it lacked.
  metrics::counter* hits = nullptr;
  metrics::counter* misses = nullptr;
  metrics::counter* evictions = nullptr;
  /// Of the evicted blocks, those passed on to the SSD store.
  metrics::counter* spilled = nullptr;

  static tier_metrics create(metrics::registry& r);
};

class host_tier final : public actors::actor<inbox> {
 public:
  /// `budget`: the bytes of blocks it keeps. `ssd`: where evicted blocks marked for it go (empty:
  /// no SSD tier); `layers`: the model's layer count, recorded with each of them.
  host_tier(std::int64_t budget, std::optional<ssd::store_address> ssd, std::int32_t layers, std::int32_t block_tokens,
            tier_metrics metrics);

  void receive(inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(store s);
  void handle(load l);
  void handle(clear);
  void handle(attach a) { scheduler_ = std::move(a.scheduler); }
  void handle(export_record e);

 private:
  /// Passes evicted records on (to the SSD, where marked and `spill`) and tells the scheduler they
  /// left.
  void evicted(std::vector<kv::host_record> gone, bool spill);
  void publish();

  kv::host_store store_;
  std::optional<ssd::store_address> ssd_;
  std::int32_t layers_ = 0;
  std::int32_t block_tokens_ = 0;
  tier_metrics metrics_;
  sched::scheduler_address scheduler_;
  kv::host_store_stats published_;
};

}  // namespace strata::host_tier
