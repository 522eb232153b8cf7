#pragma once
// engine: a loaded model with its tokenizer and chat template, and the actors that serve it
// (one layer actor per layer, the output stage, the scheduler). `strata serve` owns one.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/runtime/actor_system.hpp"
#include "actors/directory/messages.hpp"
#include "actors/host_tier/host_tier.hpp"
#include "actors/kv_fetch/fetch_actor.hpp"
#include "actors/scheduler/messages.hpp"
#include "actors/scheduler/scheduler_actor.hpp"
#include "actors/ssd/ssd_store.hpp"
#include "io/kv_events/zmq_publisher.hpp"
#include "kernels/compute_pool.hpp"
#include "server/engine/device_stages.hpp"
#include "server/engine/q4_key_file.hpp"
#include "src/chat/chat_template.hpp"
#include "src/common/buffer_warmer.hpp"
#include "src/common/metrics.hpp"
#include "src/config/config.hpp"
#include "src/grammar/grammar_compiler.hpp"
#include "src/kv/block_pool.hpp"
#include "src/kv/prefix_hash.hpp"
#include "src/model/model.hpp"
#include "src/model/q4_kv.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::engine {

/// Hears what a load is doing: a stage ("opening the model", "fingerprinting the model", "rebuilding
/// the SSD index") and how far it is (0..1; negative when unknown). Called on the loading thread.
using load_progress = std::function<void(std::string_view stage, double fraction)>;

/// Why requests may not ask for `bits` of KV precision (kv_bits) on this device, for a model whose
/// attention heads hold head_dim values, or an empty string when they may: 16 always; 8 and 4 on
/// the CPU when the heads are whole quantization blocks, and 8 on the GPU likewise (its pages are
/// f16 or q8_0) when the server's kv.default_bits (default_bits) is 8; never 4 on the GPU; other
/// values never.
std::string kv_bits_problem(int bits, bool gpu, std::int32_t head_dim, int default_bits = 16);

/// The mean keys that center q4_0 pages (model::calibrate_q4_keys over
/// model::q4_calibration_text as `tok` encodes it, BOS first when the model adds one).
result<model::q4_key_means> q4_key_means_of(std::shared_ptr<const model::model> m, const tokenizer::tokenizer& tok,
                                            kernels::compute_pool& pool);

/// The mean keys for `m` as its means file in `dir` keeps them (q4_key_file.hpp): read when the
/// file holds them, else taken by q4_key_means_of and written there. `fingerprint` is the model
/// file's (kv::model_fingerprint); null takes it here (a pass over the file).
result<q4_kept_means> q4_key_means_kept_for(std::shared_ptr<const model::model> m, const tokenizer::tokenizer& tok,
                                            kernels::compute_pool& pool, const std::filesystem::path& dir,
                                            const std::array<std::uint64_t, 2>* fingerprint = nullptr);

class engine {
 public:
  /// Opens the model, its tokenizer and chat template, and the SSD tier's index; nothing runs yet.
  static result<std::unique_ptr<engine>> load(const config::server_config& cfg, const std::string& model_path,
                                              const load_progress& progress = {});

  /// Spawns the layer actors, the output stage and the scheduler on `system`.
  void start(actors::actor_system& system, metrics::registry& registry);
  /// Once the server listens: the URL the cluster directory lists this replica's blocks under
  /// (nothing happens without cluster.redis).
  void advertise(std::string url);

  const model::model& mdl() const { return *model_; }
  const tokenizer::tokenizer& tok() const { return *tok_; }
  std::shared_ptr<const tokenizer::tokenizer> tok_ptr() const { return tok_; }
  /// The model's template, or ChatML when the GGUF has none.
  const chat::chat_template& chat() const { return *template_; }
  /// Compiles requests' grammars for this model's vocabulary (built on first use, then shared by
  /// every thread that prepares requests).
  const grammar::grammar_compiler& grammars() const;
  bool has_own_template() const { return own_template_; }
  std::string bos_text() const;
  std::string eos_text() const;
  /// The id /v1/models lists and responses carry: the first of model.served_names, else the
  /// model file's name without .gguf.
  const std::string& model_id() const { return model_id_; }
  /// Where the layers run: "cpu" or "cuda" (model.device).
  const std::string& device() const { return cfg_.model.device; }
  /// Whether a request's `model` names this model: its id, one of model.served_names, or the
  /// file's name.
  bool serves(std::string_view name) const;
  std::int32_t max_context() const { return max_context_; }
  sched::scheduler_address scheduler() const { return scheduler_; }
  /// The scheduler's figures (valid after start()).
  const sched::scheduler_metrics& stats() const { return stats_; }
  const kv::pool_config& kv_pool() const { return pool_cfg_; }
  std::int32_t block_tokens() const { return page_tokens_; }
  /// The model file's fingerprint (zero with the prefix cache off).
  const std::array<std::uint64_t, 2>& fingerprint() const { return fingerprint_; }
  /// The digest of the mean keys q4_0 pages are centered with (kv::cache_namespace::q4_keys; zero
  /// when q4_0 is not served).
  const std::array<std::uint64_t, 2>& q4_keys_digest() const { return q4_digest_; }
  const config::server_config& config() const { return cfg_; }
  /// kv_bits of requests that give none (kv.default_bits).
  int default_kv_bits() const { return default_kv_bits_; }
  /// Whether requests may ask for this KV precision: 16 always; 8 and 4 when the model's heads are
  /// whole quantization blocks, 4 on the CPU only (kv_bits_problem says which).
  bool supports_kv_bits(int bits) const { return kv_bits_problem(bits).empty(); }
  /// Why not (kv_bits_problem for this model and device), or empty.
  std::string kv_bits_problem(int bits) const;
  /// The SSD tier's figures (cache.mode = tiered with a usable directory; valid after start()),
  /// else null.
  const ssd::store_metrics* ssd_stats() const { return ssd_stats_ ? &*ssd_stats_ : nullptr; }
  /// The host tier's figures (cache.host_memory above 0; valid after start()), else null; and its
  /// budget in bytes (0: off).
  const host_tier::tier_metrics* host_stats() const { return host_stats_ ? &*host_stats_ : nullptr; }
  std::int64_t host_budget() const { return host_budget_; }
  /// The remote tier's figures (cluster.redis set; valid after start()), else null.
  const kv_fetch::fetch_metrics* fetch_stats() const { return fetch_stats_ ? &*fetch_stats_ : nullptr; }
  /// cache.mode now: as configured, until the admin API switches it.
  config::cache_mode cache_mode() const { return static_cast<config::cache_mode>(mode_.load()); }
  /// Switches cache.mode at run time (valid after start()), telling the scheduler. Fails (conflict)
  /// for a mode the server did not start with room for: hot needs the RAM tier's budget (started
  /// hot or tiered), tiered the SSD tier (started tiered, and the tier opened).
  result<void> set_cache_mode(config::cache_mode m);
  /// Evicts every cached block from RAM (valid after start()).
  void clear_hot() const { scheduler_.tell(sched::clear_hot{}); }
  /// Before the actor system stops: waits (at most `timeout`) until no step is in flight and every
  /// block left to save has been copied out and handed to its tier (sched::quiesce). False when the
  /// wait timed out (requests still running) or the scheduler is gone.
  bool quiesce(std::chrono::milliseconds timeout) const;
  /// Deletes the SSD tier's records; false when there is no SSD tier.
  bool clear_ssd() const;
  /// Drops every block of the host tier; false when there is none.
  bool clear_host() const;
  /// The SSD tier's state now (strata_ssd_state; off before start()).
  ssd::tier_state ssd_state() const { return ssd::tier_state_of(ssd_state_ ? ssd_state_->value() : 0.0); }

 private:
  engine() = default;
  /// Slots of per-sequence state each layer that keeps state (recurrent, sliding-window) holds:
  /// one per running sequence (0 for models without such layers).
  std::int32_t state_slots() const { return model_->hp.has_state() ? std::max(1, cfg_.scheduler.max_running) : 0; }
  std::shared_ptr<const model::model> model_;
  std::shared_ptr<const tokenizer::tokenizer> tok_;
  mutable std::once_flag grammars_once_;
  mutable std::unique_ptr<grammar::grammar_compiler> grammars_;
  std::optional<chat::chat_template> template_;
  bool own_template_ = false;
  std::string model_id_;
  std::vector<std::string> model_names_;  // every name serves() accepts
  std::shared_ptr<kernels::compute_pool> pool_;
  /// The GPU's stages (model.device = cuda), made at load; empty on the CPU.
  device_stages gpu_;
  std::int32_t max_context_ = 4096;
  kv::pool_config pool_cfg_;
  int default_kv_bits_ = 16;
  std::array<std::uint64_t, 2> fingerprint_{};
  /// q4_0 pages' mean keys (read from their file or taken at load, q4_key_file.hpp) and their digest.
  std::shared_ptr<const model::q4_key_means> q4_means_;
  std::array<std::uint64_t, 2> q4_digest_{};
  std::int32_t page_tokens_ = 32;
  config::server_config cfg_;
  sched::scheduler_address scheduler_;
  sched::scheduler_metrics stats_;
  /// The SSD tier's store between load() and start(), which moves it into the ssd-store actor,
  /// its only owner from then on; with the records it held at open, read before the hand-over.
  std::unique_ptr<ssd::segment_store> ssd_;
  std::vector<ssd::record_meta> ssd_catalog_;
  /// The KV-event publisher (cluster.kv_events), bound at load; the actor that feeds it takes it.
  std::unique_ptr<kv_events::zmq_publisher> kv_publisher_;
  /// The cluster directory (cluster.redis), when there is one.
  std::optional<directory::address> directory_;
  /// The remote tier: fetches blocks other replicas hold (with the directory).
  std::optional<kv_fetch::address> fetcher_;
  std::optional<kv_fetch::fetch_metrics> fetch_stats_;
  std::optional<ssd::store_metrics> ssd_stats_;
  metrics::gauge* ssd_state_ = nullptr;
  /// The host tier (config::server_config::host_memory_bytes, 0 for models with state snapshots).
  std::int64_t host_budget_ = 0;
  /// Keeps warm buffers for the host tier's saves (with the host tier on).
  std::unique_ptr<buffer_warmer> warmer_;
  std::optional<host_tier::tier_metrics> host_stats_;
  std::optional<host_tier::address> host_tier_;
  std::optional<ssd::store_address> ssd_store_;
  std::atomic<int> mode_{0};
};

}  // namespace strata::engine
