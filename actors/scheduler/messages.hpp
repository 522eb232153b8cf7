#pragma once
// Messages the scheduler receives, and the stream events it sends to a request's reply address.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "actors/hot_cache/messages.hpp"
#include "actors/pipeline/messages.hpp"
#include "actors/runtime/address.hpp"
#include "io/ssd/segment_store.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"
#include "src/sampling/generation_settings.hpp"

namespace strata::sched {

/// Why a sequence ended, as the API reports it.
enum class finish_reason { stop, length, cancelled, error };

/// A piece of a request's output: text that is safe to send (never a partial UTF-8 character,
/// never part of a stop sequence), with the token that completed it.
struct token_event {
  std::uint64_t request = 0;
  std::int32_t index = 0;  // choice index (n > 1)
  std::string text;
  std::int32_t token = -1;
  float logprob = 0.0f;
  std::vector<std::pair<std::int32_t, float>> top_logprobs;
};

/// The request is over. Counts for `usage`.
struct request_done {
  std::uint64_t request = 0;
  std::int32_t index = 0;
  finish_reason reason = finish_reason::stop;
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;
  /// Of cached_tokens, those restored from the SSD tier, and from the host tier (the rest came
  /// from the KV pool: RAM, or on the GPU its memory).
  std::int32_t ssd_cached_tokens = 0;
  std::int32_t host_cached_tokens = 0;
  /// The stop string that ended it (its index in the request's list), or -1.
  std::int32_t stop_index = -1;
  std::string error;  // set when reason == error
};

/// The request is in the scheduler's queue (or running): it will be answered with tokens and a
/// request_done. Sent before any other event of the request; a request refused gets a
/// request_rejected instead and never this.
struct request_admitted {
  std::uint64_t request = 0;
  std::int32_t index = 0;
};

/// Refused before it started (queue full, too long): the API answers 429 or 400.
struct request_rejected {
  std::uint64_t request = 0;
  int status = 429;
  std::string message;
  std::string code;
};

/// Where one API request's output goes, kept by the actor that receives the request's stream
/// events (the API's stream hub). Choices (n > 1) arrive with their index set.
class stream_sink {
 public:
  virtual ~stream_sink() = default;
  /// The scheduler took the choice (before its first token).
  virtual void on_admitted(const request_admitted& a) = 0;
  virtual void on_token(const token_event& e) = 0;
  /// One choice ended; the sink is dropped after the last one.
  virtual void on_done(const request_done& d) = 0;
  /// The scheduler refused a choice.
  virtual void on_rejected(const request_rejected& r) = 0;
};

/// Registers a sink for the scheduler requests `requests` (choice i is requests[i]). Sent to the
/// stream receiver before the submits, so it is in that mailbox before any reply.
struct open_stream {
  std::vector<std::uint64_t> requests;
  std::unique_ptr<stream_sink> sink;
};

using stream_inbox = std::variant<request_admitted, token_event, request_done, request_rejected, open_stream>;
using stream_address = actors::address<stream_inbox>;

using sampling::generation_settings;

/// A new request. The scheduler answers on reply_to: token_event*, then request_done (or one
/// request_rejected).
struct submit {
  std::uint64_t request = 0;
  std::vector<std::int32_t> prompt;
  generation_settings settings;
  stream_address reply_to;
  /// An earlier choice of the same prompt (n > 1), whose computed prompt this one reuses; 0: none.
  std::uint64_t after = 0;
};

/// Stop a request (client gone, WebSocket cancel); it leaves the batch at the next step.
struct cancel {
  std::uint64_t request = 0;
};

/// Backpressure from the client's connection: pause or resume decoding this request.
struct set_paused {
  std::uint64_t request = 0;
  bool paused = false;
};

/// From the output stage: the tokens drawn in one step.
using pipeline::step_done;

/// From the SSD store: these blocks are now on disk (written), or were refused (not_written:
/// already being written, or the queue is full), or have left it (removed: segment evicted,
/// record found corrupt), or were not written because the tier stopped writing (deferred: a full
/// or failing disk; offered again once it writes again, if RAM still holds them). `degraded`: the
/// tier's state now; the store also sends an update, maybe empty, whenever that changes.
struct ssd_update {
  std::vector<kv::block_hash> written;
  std::vector<kv::block_hash> not_written;
  std::vector<kv::block_hash> removed;
  std::vector<ssd::record_meta> deferred;
  bool degraded = false;
};

/// From the SSD store: the answer to a restore order, one entry per hash asked for, in order;
/// empty where the record was missing or failed its checks.
struct ssd_loaded {
  std::uint64_t order = 0;
  std::vector<std::optional<std::vector<std::byte>>> payloads;
};

/// From the host tier: these blocks left it (evicted past its budget, refused, or cleared); those
/// it passed on to the SSD are answered for by the SSD store (ssd_update). Its answers to restore
/// orders come as ssd_loaded, as the SSD store's do.
struct host_update {
  std::vector<kv::block_hash> dropped;
};

/// From the admin API: cache.mode changed at run time. `prefix_cache`: reuse cached prefixes (hot
/// or tiered); `ssd`: use the SSD tier (tiered; ignored where the tier did not start).
struct set_cache_mode {
  bool prefix_cache = false;
  bool ssd = false;
};

/// From the admin API: evict every cached block from RAM (blocks in use stay).
struct clear_hot {};

/// Before the process stops: `done` is called once no step is in flight and nothing is left to
/// save, so that the blocks the last requests wrote have been copied out and handed to the tiers
/// (whose mailboxes the system's stop then drains) instead of being lost with a step cut short.
struct quiesce {
  std::function<void()> done;
};

/// Where a block copied out for another replica goes: its wire record (ssd::encode_wire_record),
/// or nullopt when this replica does not hold it. Called once, from whichever actor has it; the
/// callee hands it on to its own executor (the HTTP connection's).
using export_done = std::function<void(std::optional<std::vector<std::byte>>)>;

/// From the API (GET /internal/kv/{hash}): a frozen copy of the block with this hash, from RAM
/// (copied out of the layers with the next step), else from the host tier (its frozen copy), else
/// from the SSD tier; `snapshot`: the
/// frozen boundary snapshot at its end instead (from the SSD tier).
struct export_block {
  kv::block_hash hash;
  bool snapshot = false;
  export_done done;
};

using scheduler_inbox = std::variant<submit, cancel, set_paused, step_done, ssd_update, ssd_loaded, hot_cache::reclaim,
                                     set_cache_mode, clear_hot, export_block, host_update, quiesce>;
using scheduler_address = actors::address<scheduler_inbox>;

}  // namespace strata::sched
