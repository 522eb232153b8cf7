#pragma once
// ssd_store: the only owner of the SSD tier (its segment_store: the io_uring ring, the segment files
// and the on-disk index); turns completions into messages to the scheduler.
// Who sends to it: the scheduler (persist, load), the admin API (clear) and itself (ring_ready, from the ring's eventfd;
// space_check, from a timer while the disk is full).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "actors/runtime/actor.hpp"
#include "actors/scheduler/messages.hpp"
#include "actors/ssd/messages.hpp"
#include "io/ssd/segment_store.hpp"
#include "src/common/metrics.hpp"

namespace strata::ssd {

/// The SSD tier's state, as strata_ssd_state (its value) and /health (its name) show it.
enum class tier_state {
  /// Not in use: cache.mode is not tiered, or the store could not open.
  off = 0,
  /// Writing and reading.
  on = 1,
  /// Reading only: a write failed (a full disk); writing resumes once there is room.
  degraded = 2,
};
std::string_view to_string(tier_state s);
/// The state a strata_ssd_state value stands for (off for anything unknown).
tier_state tier_state_of(double gauge_value);
/// Registers strata_ssd_state in `r`, at 0 (off).
metrics::gauge& make_state_gauge(metrics::registry& r);

/// The tier's figures in the metrics registry.
struct store_metrics {
  /// strata_ssd_state: a tier_state.
  metrics::gauge* state = nullptr;
  metrics::gauge* records = nullptr;
  metrics::gauge* bytes = nullptr;
  metrics::gauge* degraded = nullptr;
  metrics::counter* writes = nullptr;
  metrics::counter* write_bytes = nullptr;
  metrics::counter* reads = nullptr;
  metrics::counter* read_bytes = nullptr;
  metrics::counter* read_failures = nullptr;
  metrics::counter* dropped_writes = nullptr;
  metrics::counter* evicted_segments = nullptr;
  /// Blocks refused while the tier was degraded that left RAM before it wrote again: never on
  /// disk. Counted by the scheduler, which holds the RAM tier.
  metrics::counter* blocks_lost = nullptr;

  static store_metrics create(metrics::registry& r);
};

class ssd_store final : public actors::actor<store_inbox> {
 public:
  /// Takes the store over: no other thread touches it from here on (spawn with
  /// actor_system::spawn_owning; whatever the caller needs from it, such as the catalog, is read
  /// before). Send it one ring_ready to start watching the ring.
  /// `scheduler` may be empty: an attach message names it later.
  ssd_store(std::unique_ptr<segment_store> store, sched::scheduler_address scheduler, store_metrics metrics);

  void receive(store_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(persist p);
  void handle(load l);
  void handle(ring_ready);
  void handle(space_check);
  void handle(attach a) { scheduler_ = std::move(a.scheduler); }
  void handle(clear);
  void handle(export_record e);
  /// Flushes the queued writes, waiting at most flush_timeout.
  void on_stop() override;

  static constexpr auto flush_timeout = std::chrono::seconds(3);
  /// While degraded, how often the store looks for free space.
  static constexpr auto space_check_interval = std::chrono::seconds(1);

 private:
  struct order_state {
    std::vector<std::optional<std::vector<std::byte>>> payloads;
    std::size_t pending = 0;
    std::chrono::steady_clock::time_point arrived;
  };
  /// Hands what the ring finished (and `not_written`: writes refused) to the scheduler, with the
  /// tier's state when it changed.
  void deliver(completions c, std::vector<kv::block_hash> not_written = {});
  void arm();
  /// While degraded: a space_check in space_check_interval, unless one is coming already.
  void watch_space();
  void publish();
  void reply_if_done(std::uint64_t order);

  std::unique_ptr<segment_store> store_;
  sched::scheduler_address scheduler_;
  store_metrics metrics_;
  std::optional<boost::asio::posix::stream_descriptor> event_;
  bool waiting_ = false;
  std::optional<boost::asio::steady_timer> space_timer_;
  bool space_check_due_ = false;
  /// The state the scheduler was last told.
  bool told_degraded_ = false;
  std::unordered_map<std::uint64_t, order_state> orders_;
  /// Reads for other replicas, by tag (export_tag_bit set, apart from the orders'): the record's
  /// metadata, read with the request, and where its bytes go.
  struct export_state {
    record_meta meta;
    sched::export_done done;
  };
  std::unordered_map<std::uint64_t, export_state> exports_;
  std::uint64_t next_export_ = 0;
  static constexpr std::uint64_t export_tag_bit = 1ull << 63;
  // A read's tag: the order in the high bits, the index of the hash in the low 20.
  static constexpr int index_bits = 20;
  store_stats published_;
};

}  // namespace strata::ssd
