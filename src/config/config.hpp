#pragma once
// server_config: every setting of `strata serve`, its defaults, and how it is read.
// conf/strata.toml documents each key; the test in config.test.cpp keeps the two in step.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.hpp"

namespace strata::config {

/// How prefix blocks are reused (DESIGN.md, "Tiers and modes").
enum class cache_mode {
  /// No reuse: every request computes its whole prompt.
  off,
  /// RAM only: no directory, no file, no disk I/O.
  hot,
  /// RAM, and blocks written to SSD in the background; survives restarts.
  tiered,
};

std::string_view to_string(cache_mode m);
std::optional<cache_mode> parse_cache_mode(std::string_view s);

/// An accepted bearer key. `name` (optional) tags its requests' access-log lines; `salt`
/// (optional) keeps its requests' prefix cache apart from every other salt's, so that tenants
/// cannot learn each other's prompts from how fast they come back.
struct api_key {
  std::string key;
  std::string name;
  std::string salt;
  friend bool operator==(const api_key&, const api_key&) = default;
};

struct server_section {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  /// Actor and network threads; 0 means one per core.
  int threads = 0;
  /// Bearer keys; when any is set, every route but /health needs one. Empty: no authentication.
  /// In TOML each is a string (the key) or a table { key = "...", name = "...", salt = "..." }.
  std::vector<api_key> api_keys;
  /// /metrics answers without a key even when api_keys is set (a scraper on a trusted network).
  bool metrics_public = false;
  /// Origins ("https://app.example", or "*" for any) whose web pages may call the API (CORS) and
  /// open /v1/ws; empty means no CORS headers, and WebSocket handshakes from browsers (with an
  /// Origin header) are refused. Clients that send no Origin are not affected.
  std::vector<std::string> cors_origins;
};

struct model_section {
  /// A GGUF file; empty means the built-in demo model, synthesized into cache.dir on first start.
  std::string path;
  /// Context length to serve; 0 means the model's own.
  int ctx = 0;
  /// Compute threads for the kernels; 0 means one per core.
  int compute_threads = 0;
  /// Where the layers run: "cpu", or "cuda" (the first NVIDIA GPU; needs a build with -DSTRATA_CUDA=ON).
  std::string device = "cpu";
  /// The names requests may give as `model`: the first is the id /v1/models lists and responses
  /// carry, the others are aliases; the model file's name (without .gguf) is always accepted.
  /// Empty: the file's name is the id.
  std::vector<std::string> served_names;
};

struct cache_section {
  cache_mode mode = cache_mode::hot;
  /// Where tiered mode keeps its segment files and where the demo model is written.
  std::string dir = "~/.cache/strata";
  /// RAM for blocks that no request uses but that stay cached.
  std::uint64_t hot_memory = 1ull << 30;
  /// The host tier under the KV pool: host memory for frozen copies of the blocks the pool evicts,
  /// restored from there before the SSD is asked. Unset ("auto"): host_memory_auto_gpu with
  /// model.device = cuda (the pool is in GPU memory), 0 (off) on the CPU, where the pool is in RAM
  /// already. See host_memory_for().
  std::optional<std::uint64_t> host_memory;
  /// Disk budget of the SSD tier; whole segments are evicted past it.
  std::uint64_t ssd_max = 10ull << 30;
  /// Tiered mode writes every full block to the SSD as soon as it is filled, so a kill -9 loses at
  /// most the last step's blocks; false: only cached blocks evicted from RAM reach the SSD (less
  /// disk traffic, but what was in RAM at a crash is gone).
  bool write_through = true;
  /// Background reclaim of the RAM tier (the hot_cache actor): when the KV pool's free bytes fall
  /// below reclaim_low of its budget, least recently used cached blocks are evicted between steps
  /// until reclaim_high is free, so that new requests find free pages. 0 turns it off.
  double reclaim_low = 0.02;
  double reclaim_high = 0.05;
  /// Models with state beyond their attention KV (recurrent or sliding-window layers): a frozen snapshot of it is
  /// taken every snapshot_every blocks of a sequence, and at the end of each prompt (0: only
  /// there). A request resumes only from such a boundary. README says how the default was chosen.
  int snapshot_every = 16;
};

/// cache.host_memory = "auto" with model.device = cuda.
inline constexpr std::uint64_t host_memory_auto_gpu = 16ull << 30;

struct kv_section {
  /// The paged KV pool, preallocated at start.
  std::uint64_t memory = 512ull << 20;
  /// Tokens per KV block.
  int block_tokens = 32;
  /// KV format of requests that do not say: 16 (f16), 8 (q8_0) or 4 (q4_0).
  int default_bits = 16;
  /// Tokens of KV pages (in the default format, every layer) backed at start, so that the first
  /// requests after a start take no page faults; the rest is backed as it is first used.
  int prefault_tokens = 4096;
};

struct scheduler_section {
  /// Tokens one step may process: decode tokens first, then prefill chunks.
  int token_budget = 512;
  /// Prompt tokens a step takes while other sequences decode in it (0: what the budget leaves).
  int prefill_while_decoding = 0;
  /// Sequences running at once.
  int max_running = 16;
  /// Requests waiting to start; past it the API answers 429.
  int max_queued = 256;
};

struct limits_section {
  /// Largest request body, chunk extensions and trailers included; past it the API answers 413.
  std::uint64_t max_body = 8ull << 20;
  int max_connections = 10'000;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  /// Longest a single request may run, start to end.
  std::chrono::milliseconds request_timeout{600'000};
  /// On SIGTERM, how long running streams get to finish before they are cut.
  std::chrono::milliseconds shutdown_grace{10'000};
  /// A WebSocket whose client reads nothing while its outbox is full (its streams paused) is
  /// closed after this long, with 1013.
  std::chrono::milliseconds ws_stall_timeout{30'000};
};

struct log_section {
  /// trace, debug, info, warn, error, off
  std::string level = "info";
  /// One JSON object per line instead of text.
  bool json = false;
};

/// Replicas that share their cache: KV events and the cluster directory.
struct cluster_section {
  /// ZeroMQ endpoint (bound) where block events go out in vLLM's format, e.g. "tcp://*:5557";
  /// empty: none.
  std::string kv_events;
  /// ZeroMQ endpoint (bound) answering replay requests, e.g. "tcp://*:5558"; empty: none.
  std::string kv_events_replay;
  /// Topic frame of every published batch.
  std::string kv_events_topic;
  /// Seeds of the Redis cluster (or one plain Redis) that serves as the directory of which
  /// replica holds which block: "host:port,host:port"; empty: no directory.
  std::string redis;
  /// The URL other replicas and the router reach this one at; empty: http://<server.host>:<port>.
  std::string advertise_url;
  /// How long a directory entry outlives the replica that wrote it (rewritten each third of it).
  std::chrono::milliseconds directory_ttl{30'000};
  /// How long a request waits for the blocks other replicas hold (the directory's answer and the
  /// fetches together) before it computes what did not come.
  std::chrono::milliseconds fetch_timeout{1'000};
  /// A block whose wire record (4 KiB header and its KV) is at most this many bytes is kept in
  /// Redis itself, and fetched from there rather than from the replica that holds it; 0: never.
  /// 64 KiB: Redis answers one command at a time, and a value this size costs it about as much as
  /// a small command, where a block of a real model (SmolLM2-135M: 720 KiB in f16) would hold up
  /// every other replica's lookups; tiny models, q4_0 caches and small blocks fit.
  std::uint64_t redis_value_max = 64u << 10;
};

struct server_config {
  server_section server;
  model_section model;
  cache_section cache;
  kv_section kv;
  scheduler_section scheduler;
  limits_section limits;
  log_section log;
  cluster_section cluster;

  /// Checks the ranges that do not depend on the model; the message names the key.
  result<void> validate() const;
  /// cache.dir with a leading "~" expanded.
  std::filesystem::path cache_dir() const;
  /// The host tier's budget in bytes: cache.host_memory, or when "auto", host_memory_auto_gpu
  /// (at most a quarter of the machine's memory) on the GPU and 0 on the CPU; 0 with
  /// cache.mode = off.
  std::uint64_t host_memory_bytes() const;
};

/// Reads a TOML document over `base`: keys present replace the defaults; an unknown key, a wrong
/// type or a bad value is an error naming the key ("cache.mode: expected off, hot or tiered").
result<server_config> parse_toml(std::string_view text, std::string_view source_name,
                                 server_config base = {});
result<server_config> load_file(const std::filesystem::path& path, server_config base = {});

/// Every key parse_toml() accepts, as "section.key".
std::vector<std::string> known_keys();

/// cache.host_memory as conf/strata.toml and --host-memory write it: "auto", or a size.
result<std::optional<std::uint64_t>> parse_host_memory(std::string_view s);

/// "512MiB", "4GiB", "1.5GB", "1024" (bytes) -> bytes.
std::optional<std::uint64_t> parse_size(std::string_view s);
/// "250ms", "10s", "5m", "1h" -> milliseconds.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s);

}  // namespace strata::config
