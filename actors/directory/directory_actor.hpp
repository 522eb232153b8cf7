#pragma once
// directory_actor: this replica's part of the cluster directory in Redis. Each full block the
// cache holds (in RAM, in the host tier or on the SSD) is listed in a hash under its directory key
// (src/kv/directory_key.hpp): field = this replica's URL, value = when the entry expires (Unix
// seconds). The key's TTL is set again with every write, and every entry is written again each
// third of the TTL, so a replica that dies leaves nothing that outlives one TTL: readers also
// skip fields whose time has passed (a key another replica keeps alive). A block no tier holds
// any more is taken out (HDEL). Lookups answer, for a chain of hashes, the live holders of each.
//
// Small records in Redis itself: when a block's wire record (io/ssd/wire_record.hpp, header
// inside) is at most value_max bytes, the block is copied out (the scheduler's export, as for
// GET /internal/kv) once it reaches RAM or the host tier and its record is SET under value_key (same TTL, renewed
// with the entry, deleted with it); lookups then GET it too, and a fetching replica reads it
// from there instead of from a holder.
//
// Redis is reached through io/redis's cluster client on this actor's strand; its answers come
// back as messages (a write's failure is only counted: the next refresh writes it again).
// Who sends to it: the scheduler (block_batch), the engine (start), its own timer, and whoever
// looks a chain up (lookup).

#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>

#include <boost/asio/steady_timer.hpp>

#include "actors/directory/messages.hpp"
#include "actors/runtime/actor.hpp"
#include "io/redis/cluster_client.hpp"
#include "src/common/metrics.hpp"

namespace strata::directory {

struct directory_options {
  redis::cluster_options redis;
  /// The model's fingerprint and the block size, which every key carries.
  std::array<std::uint64_t, 2> model{};
  std::int32_t block_tokens = 32;
  std::chrono::seconds ttl{30};
  /// The largest wire record kept in Redis itself (0: none), and a block's KV bytes per format
  /// (kv::format_index), which with the 4096-byte header make its record.
  std::uint64_t value_max = 0;
  std::array<std::int64_t, 3> block_bytes{};
};

/// Counters of the directory's traffic (registered by create()).
struct directory_metrics {
  metrics::counter* writes = nullptr;
  metrics::counter* write_errors = nullptr;
  metrics::counter* lookups = nullptr;
  static directory_metrics create(metrics::registry& r);
};

class directory_actor final : public actors::actor<inbox> {
 public:
  directory_actor(directory_options opts, directory_metrics m);

  void receive(inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(kv_events::block_batch b);
  void handle(start s);
  void handle(refresh_tick);
  void handle(lookup l);
  void handle(value_ready v);
  void on_stop() override;

 private:
  struct held {
    kv::kv_format format = kv::kv_format::f16;
    /// The tiers holding it, one bit per kv::kv_tier: listed while any does.
    std::uint8_t tiers = 0;
    bool value = false;  // its record is in Redis
  };
  void write(const kv::block_hash& h, kv::kv_format f);
  void remove(const kv::block_hash& h, kv::kv_format f);
  void arm_timer();
  std::string key(const kv::block_hash& h, kv::kv_format f) const;
  /// Whether a block of format f has its record kept in Redis.
  bool small(kv::kv_format f) const;
  /// When an entry written now ends (Unix seconds).
  std::int64_t expiry() const;

  directory_options opts_;
  directory_metrics metrics_;
  std::string prefix_;
  std::string url_;  // empty until start
  actors::port<sched::export_block> exporter_;
  std::shared_ptr<redis::cluster_client> client_;
  std::optional<boost::asio::steady_timer> timer_;
  std::unordered_map<kv::block_hash, held, kv::block_hash_hasher> held_;
};

/// The live holders in an HGETALL reply of a directory key (fields whose expiry is still ahead).
std::vector<std::string> live_holders(const redis::reply& r, std::int64_t now_unix);

}  // namespace strata::directory
