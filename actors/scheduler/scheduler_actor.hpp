#pragma once
// scheduler_actor: owns the waiting and running queues, each request's state and the token
// budget (through its batch_planner), and the KV cache it plans with (its kv_cache_manager).
// Who sends to it: the API (submit, cancel, set_paused; the admin API set_cache_mode, clear_hot)
// and the output stage (step_done).

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "actors/host_tier/messages.hpp"
#include "actors/kv_events/messages.hpp"
#include "actors/kv_fetch/messages.hpp"
#include "actors/pipeline/messages.hpp"
#include "actors/runtime/actor.hpp"
#include "actors/scheduler/batch_planner.hpp"
#include "actors/scheduler/deferred_saves.hpp"
#include "actors/scheduler/messages.hpp"
#include "actors/scheduler/text_services.hpp"
#include "actors/ssd/messages.hpp"
#include "src/common/metrics.hpp"

namespace strata::sched {

/// The figures the scheduler keeps current in the metrics registry.
struct scheduler_metrics {
  metrics::gauge* running = nullptr;
  metrics::gauge* waiting = nullptr;
  metrics::histogram* step_seconds = nullptr;
  metrics::histogram* batch_tokens = nullptr;
  metrics::histogram* batch_sequences = nullptr;
  metrics::counter* preemptions = nullptr;
  /// Requests refused with 429 because the queue was full.
  metrics::counter* rejected = nullptr;
  metrics::counter* prompt_tokens = nullptr;
  metrics::counter* generated_tokens = nullptr;
  metrics::gauge* kv_blocks_used = nullptr;
  /// Blocks no request uses that hold a cached prefix (the hot tier).
  metrics::gauge* kv_blocks_cached = nullptr;
  metrics::counter* kv_evictions = nullptr;
  /// Of those, the blocks the hot_cache actor had evicted ahead of need.
  metrics::counter* kv_reclaimed = nullptr;
  /// Prompt tokens looked up in the prefix cache, and those found there.
  metrics::counter* prefix_query_tokens = nullptr;
  metrics::counter* prefix_hit_tokens = nullptr;
  /// Of those, the tokens restored from the SSD tier, and those fetched from other replicas.
  metrics::counter* ssd_hit_tokens = nullptr;
  metrics::counter* remote_hit_tokens = nullptr;
  /// And those restored from the host tier.
  metrics::counter* host_hit_tokens = nullptr;
  /// Blocks per KV format (f16, q8_0, q4_0) and state, and the bytes they hold.
  std::array<metrics::gauge*, 3> blocks_in_use{}, blocks_cached{}, blocks_free{};
  metrics::gauge* bytes_in_use = nullptr;
  metrics::gauge* bytes_cached = nullptr;
  /// Frozen boundary snapshots (src/kv/snapshot_index.hpp): kept now, their bytes, taken,
  /// requests resumed from one, and the tokens those did not compute.
  metrics::gauge* snapshots = nullptr;
  metrics::gauge* snapshot_bytes = nullptr;
  metrics::counter* snapshots_taken = nullptr;
  metrics::counter* snapshot_restores = nullptr;
  metrics::counter* snapshot_hit_tokens = nullptr;
  /// From a request's arrival at the scheduler to its first generated token.
  metrics::histogram* ttft_seconds = nullptr;
  /// Between consecutive generated tokens of one sequence.
  metrics::histogram* inter_token_seconds = nullptr;
  /// Blocks the SSD tier did not write while it was degraded that RAM evicted before it wrote
  /// again. Not made by create(): whoever wires the tier sets it (the engine, from the tier's
  /// own metrics).
  metrics::counter* ssd_blocks_lost = nullptr;

  /// Registers the scheduler's metrics in `r`.
  static scheduler_metrics create(metrics::registry& r);
};

struct scheduler_config {
  planner_options planner;
  /// A pool of kv_blocks f16 blocks, all of which may stay cached...
  std::int32_t kv_blocks = 1024;
  /// ... or, when set, this pool (every format, byte budgets: the engine's).
  std::optional<kv::pool_config> pool;
  /// The SSD tier (cache.mode = tiered, planner.ssd set): its store, the records it held at start,
  /// and the model's layer count (recorded with each block).
  std::optional<ssd::store_address> ssd;
  std::vector<ssd::record_meta> ssd_catalog;
  std::int32_t n_layers = 0;
  /// The background eviction of the RAM tier, when set: pressure reports go there after a step
  /// leaves the pool's free bytes below marks.low of its budget.
  std::optional<hot_cache::address> hot_cache;
  hot_cache::watermarks marks;
  /// The host tier (planner.host set): evicted blocks are saved there, host orders go there.
  std::optional<host_tier::address> host;
  /// The remote tier (planner.remote set): remote restore orders go there.
  std::optional<actors::port<kv_fetch::fetch>> remote;
  /// Who hears of the blocks the cache stores and drops (the KV-event publisher, the cluster
  /// directory): one batch per step, when there is news.
  std::vector<kv_events::batch_port> block_watchers;
};

class scheduler_actor final : public actors::actor<scheduler_inbox> {
 public:
  /// Steps go to `first_stage` (layer 0) and come back from the output stage to this actor, as
  /// each step's reply port; samplers are opened and closed at `output` directly.
  scheduler_actor(scheduler_config cfg, text_services text, pipeline::stage_address first_stage,
                  pipeline::stage_address output, scheduler_metrics metrics);

  void receive(scheduler_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(submit s);
  void handle(cancel c);
  void handle(set_paused p);
  void handle(step_done d);
  void handle(ssd_update u);
  void handle(ssd_loaded l);
  void handle(hot_cache::reclaim r);
  void handle(set_cache_mode m);
  void handle(clear_hot);
  void handle(export_block e);
  void handle(host_update u);
  void handle(quiesce q);
  void on_stop() override;

 private:
  struct request_state {
    stream_address reply_to;
    generation_settings settings;
    std::unique_ptr<text_assembler> text;
    int stop_index = -1;  // the stop sequence that ended it
    std::int32_t prompt_tokens = 0;
    std::int32_t generated = 0;
    std::chrono::steady_clock::time_point arrived;
    std::chrono::steady_clock::time_point last_token;
  };

  void finish(std::uint64_t id, finish_reason reason);
  void maybe_step();
  /// Calls the quiesce callbacks once no step is in flight (maybe_step found nothing to run).
  void answer_quiesced();
  void publish_gauges();
  /// Tells the hot_cache actor when free pages ran low (one report at a time).
  void report_pressure();
  /// Sends the frozen blocks of a finished step to the host tier or the SSD store, as each save says.
  void persist(std::vector<pipeline::frozen_block> saved);
  /// Sends the snapshots taken with the last step to the SSD tier (tiered mode), as snapshot
  /// records; while it is degraded they are dropped (the next snapshot is written instead).
  void persist_snapshots();
  /// While the SSD tier is degraded, moves the step's saves to deferred_ (no copying out for a
  /// disk that refuses them); while it writes, adds to them the deferred saves RAM still holds.
  void route_saves(std::vector<kv::save_item>& saves);
  /// Forgets saves that will never reach the disk, counting them in ssd_blocks_lost.
  void lose(const std::vector<kv::block_hash>& lost);
  /// Sends the block events gathered since the last call to the block watchers.
  void flush_block_events();

  /// A block pinned in RAM for another replica, copied out of the layers with a step
  /// (scheduler_exports.cpp).
  struct pending_export {
    std::int32_t block = -1;
    kv::block_hash hash;
    kv::kv_format format = kv::kv_format::f16;
    export_done done;
  };
  /// Moves the queued exports into the layout's saves (after the step's own), except those whose
  /// block the layout loads (a save is copied out before the loads): they wait for the next step.
  void add_exports(pipeline::batch_layout& layout);
  /// The step's copies of the exports it carried (the saves after the step's own): each one's
  /// record goes out, and its block is unpinned.
  void finish_exports(std::vector<pipeline::frozen_block> copies);

  /// Gathers the cache manager's block events between flushes.
  struct event_buffer final : kv::block_observer {
    std::vector<kv::block_event> events;
    void on_block(kv::block_event e) override { events.push_back(std::move(e)); }
  };

  /// The most bytes of deferred blocks one step copies out once the tier writes again.
  static constexpr std::int64_t resave_bytes_per_step = 64ll << 20;

  scheduler_config cfg_;
  text_services text_;
  pipeline::stage_address first_stage_;
  pipeline::stage_address output_;
  scheduler_metrics metrics_;
  kv::kv_cache_manager cache_;
  batch_planner planner_;
  std::unordered_map<std::uint64_t, request_state> requests_;
  bool in_flight_ = false;
  bool pressure_reported_ = false;  // a report is out, its answer not yet in
  step_plan pending_;
  std::vector<kv::save_item> pending_saves_;   // what the step in flight saves, in layout order
  std::vector<pipeline::frozen_block> loads_;  // restored blocks for the next step
  std::uint64_t next_step_ = 1;
  std::chrono::steady_clock::time_point step_started_;
  /// The step in flight moves blocks between tiers (saves, loads or copies): logged at debug level
  /// when it ends, with its time.
  bool tier_step_ = false;
  /// quiesce callbacks waiting for the step in flight (and the saves it leaves) to end.
  std::vector<std::function<void()>> quiesced_;
  planner_counters published_;  // the planner's counters as last added to the metrics
  std::uint64_t published_evictions_ = 0;
  kv::snapshot_stats published_snapshots_;  // the cache's snapshot figures as last published
  bool ssd_degraded_ = false;  // as the SSD store last said
  deferred_saves deferred_;
  event_buffer block_events_;
  std::vector<pending_export> exports_queued_;
  std::vector<pending_export> exports_in_flight_;
};

}  // namespace strata::sched
