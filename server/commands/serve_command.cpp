// `strata serve`: loads the configuration, starts the actors and the HTTP server, and runs until
// SIGINT or SIGTERM.

#include <malloc.h>

#include <csignal>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include "actors/runtime/actor_system.hpp"
#include "io/http_server.hpp"
#include "server/api/admin_controls.hpp"
#include "server/api/web_assets.hpp"
#include "server/api/router.hpp"
#include "server/commands/command_registry.hpp"
#include "src/common/log.hpp"
#include "src/config/config.hpp"
#include "server/api/completions_service.hpp"
#include "actors/stream/stream_hub.hpp"
#include "server/engine/engine.hpp"
#include "src/model/synth.hpp"

namespace strata::commands {
namespace {

/// Counts responses by status in strata_responses_total{status="..."}; the statuses the server
/// sends get their own series, anything else lands in status="other".
std::function<void(int)> response_counter(metrics::registry& r) {
  static constexpr int known[] = {101, 200, 400, 401, 404, 405, 408, 409, 413, 429, 431, 500, 503, 504};
  auto table = std::make_shared<std::map<int, metrics::counter*>>();
  for (int code : known)
    (*table)[code] = &r.make_counter("strata_responses_total", "HTTP responses by status.", "status=\"" + std::to_string(code) + "\"");
  metrics::counter* other = &r.make_counter("strata_responses_total", "HTTP responses by status.", "status=\"other\"");
  return [table, other](int status) {
    auto it = table->find(status);
    (it == table->end() ? other : it->second)->inc();
  };
}

/// The API's routes, answered by `c` once the model is loaded (the router answers 503 until then).
void add_service_routes(api::router& router, const std::unique_ptr<api::completions_service>& c) {
  using io::http::verb;
  using io::http_request;
  using io::request_context;
  router.add(verb::post, "/v1/chat/completions", [&c](http_request& r, const request_context& x) { return c->chat(r, x); });
  router.add(verb::post, "/v1/completions", [&c](http_request& r, const request_context& x) { return c->completion(r, x); });
  router.add(verb::post, "/v1/messages", [&c](http_request& r, const request_context& x) { return c->messages(r, x); });
  router.add(verb::post, "/v1/messages/count_tokens", [&c](http_request& r, const request_context& x) { return c->count_tokens(r, x); });
  router.add(verb::post, "/v1/responses", [&c](http_request& r, const request_context& x) { return c->responses(r, x); });
  router.add_prefix(verb::get, "/v1/responses/", [&c](http_request& r, const request_context& x) { return c->response_get(r, x); });
  router.add_prefix(verb::delete_, "/v1/responses/",
                    [&c](http_request& r, const request_context& x) { return c->response_delete(r, x); });
  router.add(verb::post, "/tokenize", [&c](http_request& r, const request_context& x) { return c->tokenize(r, x); });
  router.add(verb::post, "/internal/chain", [&c](http_request& r, const request_context& x) { return c->chain(r, x); });
  router.add_prefix(verb::get, "/internal/kv/", [&c](http_request& r, const request_context& x) { return c->kv_record(r, x); });
  router.add(verb::post, "/detokenize", [&c](http_request& r, const request_context& x) { return c->detokenize(r, x); });
  router.add(verb::get, "/v1/ws", [&c](http_request& r, const request_context& x) { return c->websocket(r, x); });
}

/// Keeps the load's stage in `status` (for /health and the dashboard) and logs it: each stage as
/// it starts, then its progress about once a second.
engine::load_progress progress_reporter(api::server_status& status) {
  struct last_log {
    std::string stage;
    std::chrono::steady_clock::time_point at;
  };
  auto last = std::make_shared<last_log>();
  return [&status, last](std::string_view stage, double fraction) {
    status.set_loading(std::string(stage), fraction);
    const auto now = std::chrono::steady_clock::now();
    if (stage != last->stage) {
      spdlog::info("loading: {}", stage);
      *last = {std::string(stage), now};
    } else if (fraction >= 0 && now - last->at >= std::chrono::seconds(1)) {
      spdlog::info("loading: {}: {:.0f} %", stage, fraction * 100);
      last->at = now;
    }
  };
}

struct serve_options {
  std::string config_file;
  std::optional<std::string> model, host, cache_mode, cache_dir, log_level, kv_events, kv_events_replay, redis,
      advertise_url, directory_ttl, device, host_memory;
  std::optional<int> port, threads, snapshot_every;
  std::vector<std::string> api_keys;
  std::vector<std::string> served_names;
  bool log_json = false;
  bool demo = false;
};

/// The built-in demo: a small random-weight model with the built-in byte-level vocabulary,
/// synthesized once into the cache directory.
result<std::filesystem::path> demo_model(const config::server_config& cfg) {
  std::filesystem::path demo = cfg.cache_dir() / "demo-qwen2-q8_0.gguf";
  if (std::filesystem::exists(demo)) return demo;
  std::error_code ec;
  std::filesystem::create_directories(demo.parent_path(), ec);
  spdlog::info("synthesizing the built-in demo model into {}", demo.string());
  model::synth_options so;
  so.arch = "qwen2";
  so.layers = 4;
  so.hidden = 256;
  so.heads = 4;
  so.kv_heads = 2;
  so.ffn = 768;
  so.vocab = "builtin";
  so.type = "q8_0";
  so.ctx = 4096;
  so.seed = 1;
  so.name = "strata-demo";
  so.out = demo;
  if (auto r = model::synthesize(so); !r) return std::move(r).err();
  return demo;
}

/// The default model, SmolLM2-135M-Instruct, where scripts/fetch-model.sh puts it:
/// $STRATA_MODEL_DIR, else $XDG_CACHE_HOME/strata/models, else ~/.cache/strata/models.
result<std::filesystem::path> default_model() {
  static constexpr const char* file = "SmolLM2-135M-Instruct.Q4_1.gguf";
  std::filesystem::path dir;
  if (const char* d = std::getenv("STRATA_MODEL_DIR"); d && *d) {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::filesystem::path(x) / "strata" / "models";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::filesystem::path(h) / ".cache" / "strata" / "models";
  }
  std::filesystem::path path = dir / file;
  std::error_code ec;
  if (!dir.empty() && std::filesystem::is_regular_file(path, ec)) return path;
  return fail(errc::not_found, "no model: the default model ", file, " is not in ",
              dir.empty() ? std::string("$STRATA_MODEL_DIR (unset, and so is $HOME)") : dir.string(),
              ". Fetch it with scripts/fetch-model.sh (or start with scripts/run.sh, which does), pass "
              "--model FILE.gguf, or pass --demo for the random-weight demo model");
}

result<config::server_config> resolve(const serve_options& o) {
  config::server_config cfg;
  if (!o.config_file.empty()) {
    auto loaded = config::load_file(o.config_file);
    if (!loaded) return std::move(loaded).err();
    cfg = std::move(*loaded);
  }
  if (o.model) cfg.model.path = *o.model;
  if (o.host) cfg.server.host = *o.host;
  if (o.port) {
    if (*o.port < 0 || *o.port > 65535) return fail(errc::invalid_argument, "--port: must be 0..65535");
    cfg.server.port = static_cast<std::uint16_t>(*o.port);
  }
  if (o.threads) cfg.server.threads = *o.threads;
  if (o.device) {
    if (*o.device != "cpu" && *o.device != "cuda") return fail(errc::invalid_argument, "--device: expected cpu or cuda, got '", *o.device, "'");
    cfg.model.device = *o.device;
  }
  if (o.cache_mode) {
    auto m = config::parse_cache_mode(*o.cache_mode);
    if (!m) return fail(errc::invalid_argument, "--cache-mode: expected off, hot or tiered, got '", *o.cache_mode, "'");
    cfg.cache.mode = *m;
  }
  if (o.cache_dir) cfg.cache.dir = *o.cache_dir;
  if (o.host_memory) {
    auto v = config::parse_host_memory(*o.host_memory);
    if (!v) return fail(errc::invalid_argument, "--host-memory: expected \"auto\" or a size such as 8GiB (0: off), got '",
                        *o.host_memory, "'");
    cfg.cache.host_memory = *v;
  }
  if (o.snapshot_every) {
    if (*o.snapshot_every < 0) return fail(errc::invalid_argument, "--snapshot-every: must be 0 or more");
    cfg.cache.snapshot_every = *o.snapshot_every;
  }
  if (o.kv_events) cfg.cluster.kv_events = *o.kv_events;
  if (o.kv_events_replay) cfg.cluster.kv_events_replay = *o.kv_events_replay;
  if (o.redis) cfg.cluster.redis = *o.redis;
  if (o.advertise_url) cfg.cluster.advertise_url = *o.advertise_url;
  if (o.directory_ttl) {
    auto d = config::parse_duration(*o.directory_ttl);
    if (!d || d->count() < 1000) return fail(errc::invalid_argument, "--directory-ttl: expected a duration of 1s or more, got '", *o.directory_ttl, "'");
    cfg.cluster.directory_ttl = *d;
  }
  if (o.log_level) cfg.log.level = *o.log_level;
  if (o.log_json) cfg.log.json = true;
  if (!o.served_names.empty()) cfg.model.served_names = o.served_names;
  if (!o.api_keys.empty()) {
    cfg.server.api_keys.clear();
    for (const auto& k : o.api_keys) cfg.server.api_keys.push_back(config::api_key{k, {}, {}});
  }
  if (auto v = cfg.validate(); !v) return std::move(v).err();
  std::error_code ec;
  if (const auto dir = cfg.cache_dir(); std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return fail(errc::invalid_argument, "cache.dir: ", dir.string(), " is not a directory");
  }
  return cfg;
}

int serve(const serve_options& opts) {
  auto cfg_r = resolve(opts);
  if (!cfg_r) {
    std::fprintf(stderr, "strata serve: %s\n", cfg_r.err().message.c_str());
    return 2;
  }
  const config::server_config& cfg = *cfg_r;
  log::init(cfg.log.level, cfg.log.json);
  // Buffers of a few hundred KiB come and go with every step (activations, KV blocks on their
  // way to and from the SSD). By default glibc maps each one fresh and unmaps it on free, so
  // every use pays a page fault per 4 KiB; keeping them in the heap lets the next step reuse the
  // same, already mapped memory. The KV pool and the model are far larger and still get their own
  // mappings.
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);

  // Everything actors touch is declared before the system, so it outlives them.
  metrics::registry metrics;
  actors::actor_system system({.threads = cfg.server.threads == 0 ? -1 : cfg.server.threads});
  api::server_status status;
  status.api_keys = cfg.server.api_keys;
  status.metrics_public = cfg.server.metrics_public;
  status.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  api::router router(status, metrics);

  std::unique_ptr<engine::engine> eng;
  std::unique_ptr<api::completions_service> completions;
  std::string model_path = cfg.model.path;
  if (opts.demo) {
    auto demo = demo_model(cfg);
    if (!demo) {
      spdlog::error("cannot synthesize the demo model: {}", demo.err().message);
      return 1;
    }
    spdlog::info("serving the built-in demo model {} (random weights: its text is noise)", demo->string());
    model_path = demo->string();
  } else if (model_path.empty()) {
    auto found = default_model();
    if (!found) {
      spdlog::error("{}", found.err().message);
      return 1;
    }
    spdlog::info("serving the default model {}", found->string());
    model_path = found->string();
  }
  add_service_routes(router, completions);
  api::add_admin_routes(router, eng, status);
  api::add_web_routes(router);

  io::http_options http_opts;
  http_opts.host = cfg.server.host;
  http_opts.port = cfg.server.port;
  http_opts.max_body = cfg.limits.max_body;
  http_opts.max_connections = cfg.limits.max_connections;
  http_opts.header_timeout = cfg.limits.header_timeout;
  http_opts.idle_timeout = cfg.limits.idle_timeout;
  http_opts.cors_origins = cfg.server.cors_origins;
  http_opts.on_response = response_counter(metrics);
  auto server = std::make_shared<io::http_server>(
      system.context(), http_opts,
      [&router](io::http_request& req, const io::request_context& ctx) -> io::handler_result { return router.handle(req, ctx); });
  if (auto started = server->start(); !started) {
    spdlog::error("{}", started.err().message);
    return 1;
  }

  boost::asio::signal_set signals(system.context(), SIGINT, SIGTERM);
  signals.async_wait([&system](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}; shutting down", sig);
    system.request_stop();
  });

  // Listening before the load, so that a probe sees why the server is not ready yet: /health
  // answers 503 with the stage until then, and so does every API route.
  spdlog::info("strata listening on http://{}:{}; loading {} (/health answers 503 until it is ready)", cfg.server.host,
               server->port(), model_path);
  auto loaded = engine::engine::load(cfg, model_path, progress_reporter(status));
  if (!loaded) {
    spdlog::error("{}", loaded.err().message);
    server->stop();
    signals.cancel();
    system.stop();
    return 1;
  }
  eng = std::move(*loaded);
  status.set_loading("starting the actors", -1);
  eng->start(system, metrics);
  status.model_id = eng->model_id();
  status.device = eng->device();
  completions = std::make_unique<api::completions_service>(
      *eng, system.spawn<stream::stream_hub>("stream-hub", actors::supervision::stop_system));
  const engine::engine* e = eng.get();
  status.ssd_state = [e] { return ssd::to_string(e->ssd_state()); };
  spdlog::info("strata ready on http://{}:{} (cache mode {}, SSD tier {}, {} threads)", cfg.server.host, server->port(),
               config::to_string(cfg.cache.mode), ssd::to_string(e->ssd_state()), system.thread_count());
  eng->advertise(cfg.cluster.advertise_url.empty() ? "http://" + cfg.server.host + ":" + std::to_string(server->port())
                                                  : cfg.cluster.advertise_url);
  status.ready.store(true);

  system.wait_for_stop_request();
  server->stop();
  // Woken as each busy connection ends, for at most the grace period.
  if (!server->wait_idle(cfg.limits.shutdown_grace)) {
    spdlog::warn("{} connections still open after {} ms; closing them", server->connections(),
                 cfg.limits.shutdown_grace.count());
  }
  // The blocks the last requests left to save (write-through to the SSD, a save step in flight)
  // reach their tier before the mailboxes close: a reply may go out before the step that saves
  // its blocks has run.
  if (!eng->quiesce(std::chrono::seconds(10))) spdlog::warn("the scheduler was still busy after 10 s; stopping anyway");
  signals.cancel();
  system.stop();
  spdlog::info("stopped");
  return 0;
}

const bool registered = register_command("serve", "Run the OpenAI-compatible HTTP server", [](CLI::App& sub) {
  auto o = std::make_shared<serve_options>();
  sub.add_option("--config", o->config_file, "TOML configuration file (see conf/strata.toml)");
  sub.add_option("-m,--model", o->model,
                 "GGUF model file (default: SmolLM2-135M-Instruct as scripts/fetch-model.sh installs it)");
  sub.add_flag("--demo", o->demo, "Serve the built-in random-weight demo model (its text is noise)")->excludes("--model");
  sub.add_option("--host", o->host, "Address to listen on");
  sub.add_option("--port", o->port, "Port to listen on (0 = any free port)");
  sub.add_option("--threads", o->threads, "Actor and network threads (0 = one per core)");
  sub.add_option("--device", o->device, "Where the layers run: cpu | cuda (the first NVIDIA GPU; needs a -DSTRATA_CUDA=ON build)");
  sub.add_option("--cache-mode", o->cache_mode, "off | hot | tiered");
  sub.add_option("--cache-dir", o->cache_dir, "Directory for the SSD tier and the demo model");
  sub.add_option("--host-memory", o->host_memory,
                 "Host tier under the KV pool (frozen copies of evicted blocks): a size such as 8GiB, 0 (off), or auto "
                 "(16GiB on the GPU, off on the CPU)");
  sub.add_option("--snapshot-every", o->snapshot_every,
                 "Blocks between frozen state snapshots of recurrent and sliding-window models (0: only at each prompt's end)");
  sub.add_option("--api-key", o->api_keys, "Accepted API key (repeatable)");
  sub.add_option("--served-model-name", o->served_names,
                 "A name requests may give as model (repeatable): the first is the id /v1/models lists, the others aliases");
  sub.add_option("--kv-events", o->kv_events, "Publish KV block events (vLLM's ZeroMQ format) on this endpoint, e.g. tcp://*:5557");
  sub.add_option("--redis", o->redis, "Redis cluster seeds for the shared block directory: host:port[,host:port...]");
  sub.add_option("--advertise-url", o->advertise_url, "URL other replicas and the router reach this one at (default http://host:port)");
  sub.add_option("--directory-ttl", o->directory_ttl, "How long directory entries outlive this replica, e.g. 30s");
  sub.add_option("--kv-events-replay", o->kv_events_replay, "Answer KV-event replay requests on this endpoint, e.g. tcp://*:5558");
  sub.add_option("--log-level", o->log_level, "trace | debug | info | warn | error | off");
  sub.add_flag("--log-json", o->log_json, "Write logs as JSON lines");
  return std::function<int()>([o] { return serve(*o); });
});

}  // namespace
}  // namespace strata::commands
