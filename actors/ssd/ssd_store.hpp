#pragma once
// ssd_store: the only owner of the SSD tier (its segment_store: the io_uring ring, the segment files
// and the on-disk index); turns completions into messages to the scheduler.
// Who sends to it: the scheduler (persist, load) and itself (ring_ready, from the ring's eventfd).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <boost/asio/posix/stream_descriptor.hpp>

#include "actors/runtime/actor.hpp"
#include "actors/scheduler/messages.hpp"
#include "actors/ssd/messages.hpp"
#include "io/ssd/segment_store.hpp"
#include "src/common/metrics.hpp"

namespace strata::ssd {

/// The tier's figures in the metrics registry.
struct store_metrics {
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

  static store_metrics create(metrics::registry& r);
};

class ssd_store final : public actors::actor<store_inbox> {
 public:
  /// Takes the store over: no other thread touches it from here on (spawn with
  /// actor_system::spawn_owning; whatever the caller needs from it, such as the catalog, is read
  /// before). Send it one ring_ready to start watching the ring.
  ssd_store(std::unique_ptr<segment_store> store, sched::scheduler_address scheduler, store_metrics metrics);

  void receive(store_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(persist p);
  void handle(load l);
  void handle(ring_ready);
  /// Flushes the queued writes, waiting at most flush_timeout.
  void on_stop() override;

  static constexpr auto flush_timeout = std::chrono::seconds(3);

 private:
  struct order_state {
    std::vector<std::optional<std::vector<std::byte>>> payloads;
    std::size_t pending = 0;
    std::chrono::steady_clock::time_point arrived;
  };
  /// Hands what the ring finished to the scheduler.
  void deliver(completions c);
  void arm();
  void publish();
  void reply_if_done(std::uint64_t order);

  std::unique_ptr<segment_store> store_;
  sched::scheduler_address scheduler_;
  store_metrics metrics_;
  std::optional<boost::asio::posix::stream_descriptor> event_;
  bool waiting_ = false;
  std::unordered_map<std::uint64_t, order_state> orders_;
  // A read's tag: the order in the high bits, the index of the hash in the low 20.
  static constexpr int index_bits = 20;
  store_stats published_;
};

}  // namespace strata::ssd
