#include "server/engine/engine.hpp"

#include <algorithm>
#include <filesystem>
#include <future>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/directory/directory_actor.hpp"
#include "src/common/block_buffers.hpp"
#include "actors/kv_fetch/fetch_actor.hpp"
#include "actors/hot_cache/hot_cache.hpp"
#include "actors/kv_events/kv_events_actor.hpp"
#include "actors/pipeline/layer_actor.hpp"
#include "actors/pipeline/output_actor.hpp"
#include "actors/scheduler/scheduler_actor.hpp"
#include "actors/ssd/ssd_store.hpp"
#include "io/ssd/segment_store.hpp"
#include "kernels/delta_rule.hpp"
#include "server/engine/q4_key_file.hpp"
#include "server/engine/stages.hpp"
#include "src/sampling/text_stream.hpp"

namespace strata::engine {
namespace {

const char* const k_chatml =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

class assembler final : public sched::text_assembler {
 public:
  explicit assembler(std::vector<std::string> stop) : t_(std::move(stop)) {}
  output feed(const std::string& piece) override {
    auto o = t_.feed(piece);
    return {std::move(o.text), o.stopped, o.stopped ? t_.matched_stop() : -1};
  }
  std::string finish() override { return t_.finish(); }

 private:
  sampling::text_stream t_;
};

}  // namespace

std::string kv_bits_problem(int bits, bool gpu, std::int32_t head_dim, int default_bits) {
  if (bits == 16) return {};
  if (bits != 8 && bits != 4) return "KV precision is 16, 8 or 4 bits";
  if (gpu && bits == 4) return "the GPU (--device cuda) keeps KV pages in f16 or q8_0 only";
  if (gpu && default_bits != 8)
    return "the GPU (--device cuda) keeps q8_0 pages only when the server starts with kv.default_bits = 8 (each format takes "
           "a device pool of its own, reserved at start)";
  if (head_dim % kv::k_kv_quant_block != 0)
    return "needs attention heads of a multiple of " + std::to_string(kv::k_kv_quant_block) + " values; this model's have " +
           std::to_string(head_dim);
  return {};
}

std::string engine::kv_bits_problem(int bits) const {
  return strata::engine::kv_bits_problem(bits, cfg_.model.device == "cuda", model_->hp.head_dim, cfg_.kv.default_bits);
}

result<std::unique_ptr<engine>> engine::load(const config::server_config& cfg, const std::string& path,
                                             const load_progress& progress) {
  auto report = [&progress](std::string_view stage, double fraction) {
    if (progress) progress(stage, fraction);
  };
  std::unique_ptr<engine> e(new engine());
  e->cfg_ = cfg;
  e->mode_.store(static_cast<int>(cfg.cache.mode));
  auto t0 = std::chrono::steady_clock::now();
  report("opening the model", -1);
  auto m = model::model::load(path);
  if (!m) return std::move(m).err();
  e->model_ = *m;
  auto tok = tokenizer::tokenizer::from_gguf(e->model_->file);
  if (!tok) return fail(tok.err().code, path, ": ", tok.err().message);
  e->tok_ = std::make_shared<const tokenizer::tokenizer>(std::move(*tok));
  std::string source = e->tok_->chat_template();
  e->own_template_ = !source.empty();
  auto tmpl = chat::chat_template::parse(e->own_template_ ? source : k_chatml);
  if (!tmpl) {
    spdlog::warn("the model's chat template does not parse ({}); using ChatML", tmpl.err().message);
    tmpl = chat::chat_template::parse(k_chatml);
    e->own_template_ = false;
  }
  e->template_.emplace(std::move(*tmpl));
  e->model_names_ = cfg.model.served_names;
  e->model_names_.push_back(std::filesystem::path(path).stem().string());
  e->model_id_ = e->model_names_.front();
  const auto& hp = e->model_->hp;
  e->max_context_ = cfg.model.ctx > 0 ? cfg.model.ctx : std::min(hp.n_ctx_train, 32768);
  e->page_tokens_ = cfg.kv.block_tokens;
  // The pool holds kv.memory for running sequences plus, when prefixes are reused, the hot tier's
  // cache.hot_memory for blocks no request uses. It is a byte budget: a block costs what its
  // format's pages take in every layer, so q8_0 and q4_0 requests fit about 1.9 and 3.6 times the
  // tokens of f16 ones. Pages are reserved up front and touched only when first written, so an
  // idle server's resident memory stays small.
  const bool reuse = e->cfg_.cache.mode != config::cache_mode::off;
  const bool gpu = cfg.model.device == "cuda";
  kv::pool_config& pc = e->pool_cfg_;
  // Only layers without per-sequence state write KV pages (a recurrent or sliding-window layer's
  // pages stay untouched, so unbacked: it keeps its state, or its window, in its state slots).
  int kv_layers = 0;
  for (int il = 0; il < hp.n_layer; ++il) kv_layers += hp.keeps_state(il) ? 0 : 1;
  for (kv::kv_format f : kv::k_kv_formats)
    pc.block_bytes[static_cast<std::size_t>(kv::format_index(f))] =
        kv::kv_row_bytes(f, hp.kv_dim()) * e->page_tokens_ * 2 * std::max(kv_layers, 1);
  const std::int64_t f16_block = pc.block_bytes[0];
  const std::int64_t min_pages = (e->max_context_ + e->page_tokens_ - 1) / e->page_tokens_ + 1;
  pc.budget = std::max<std::int64_t>(static_cast<std::int64_t>(cfg.kv.memory), min_pages * f16_block) +
              (reuse ? static_cast<std::int64_t>(cfg.cache.hot_memory) : 0);
  pc.cached_budget = reuse ? std::min<std::int64_t>(static_cast<std::int64_t>(cfg.cache.hot_memory), pc.budget) : 0;
  for (kv::kv_format f : kv::k_kv_formats) {
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    // A format's bits are its kv_bits (f16 is 16, never a problem). Quantized pages only where
    // requests may ask for them (whole blocks per head; on the GPU q8_0 only, in a device pool of
    // its own beside the f16 one, so only where kv.default_bits asks for it: device memory is
    // reserved up front, and a second pool of the whole budget doubles it).
    const bool kept = strata::engine::kv_bits_problem(static_cast<int>(f), gpu, hp.head_dim, cfg.kv.default_bits).empty();
    pc.space.capacity[i] = kept ? static_cast<std::int32_t>(pc.budget / pc.block_bytes[i]) : 0;
  }
  // The host tier under the pool. A model with per-sequence state resumes only where a snapshot
  // is; its evicted blocks are kept by the SSD tier alone.
  e->host_budget_ = static_cast<std::int64_t>(cfg.host_memory_bytes());
  if (e->host_budget_ > 0 && hp.has_state()) {
    spdlog::info("cache.host_memory: not used for {} (its sliding-window or recurrent layers resume only at a frozen "
                 "snapshot, which the host tier does not keep)", model::arch_name(hp.architecture));
    e->host_budget_ = 0;
  }
  if (e->host_budget_ > 0 && e->host_budget_ < f16_block)
    return fail(errc::invalid_argument, "cache.host_memory: ", e->host_budget_, " bytes hold not one KV block of this model (",
                f16_block, " bytes in f16); give at least that, or 0 to turn the host tier off");
  e->default_kv_bits_ = cfg.kv.default_bits;
  if (!e->supports_kv_bits(e->default_kv_bits_)) {
    spdlog::warn("kv.default_bits = {}: {}; using 16", e->default_kv_bits_, e->kv_bits_problem(e->default_kv_bits_));
    e->default_kv_bits_ = 16;
  }
  if (reuse) {
    auto f0 = std::chrono::steady_clock::now();
    report("fingerprinting the model", 0);
    e->fingerprint_ = kv::model_fingerprint(e->model_->file.bytes(), [&](double f) { report("fingerprinting the model", f); });
    e->model_->drop_file_pages();  // the fingerprint read every page of the file
    spdlog::info("model fingerprint {:016x}{:016x} ({:.2f} s)", e->fingerprint_[1], e->fingerprint_[0],
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count());
  }
  if (e->cfg_.cache.mode == config::cache_mode::tiered) {
    ssd::store_options so;
    so.dir = cfg.cache_dir() / "kv";
    so.model = e->fingerprint_;
    so.max_bytes = cfg.cache.ssd_max;
    so.payload_hint = static_cast<std::size_t>(pc.block_bytes[0]);
    // Sixteen segments or more within the budget, so evicting one frees a small part of it.
    so.segment_bytes = std::clamp<std::uint64_t>(cfg.cache.ssd_max / 16, 1ull << 20, 256ull << 20);
    so.progress = [&](double f) { report("rebuilding the SSD index", f); };
    report("rebuilding the SSD index", 0);
    auto store = ssd::segment_store::open(so);
    if (!store) {
      spdlog::warn("cache.mode = tiered: the SSD tier cannot start ({}); cached prefixes stay in RAM (as hot)",
                   store.err().message);
    } else {
      e->ssd_catalog_ = (*store)->catalog();
      e->ssd_ = std::move(*store);
    }
  }
  if (!reuse && (!cfg.cluster.kv_events.empty() || !cfg.cluster.redis.empty()))
    return fail(errc::invalid_argument, "cluster.kv_events and cluster.redis need the prefix cache (cache.mode hot or tiered)");
  if (!cfg.cluster.redis.empty() && !redis::parse_nodes(cfg.cluster.redis))
    return fail(errc::invalid_argument, "cluster.redis: expected host:port[,host:port...], got '", cfg.cluster.redis, "'");
  if (!cfg.cluster.kv_events.empty()) {
    auto pub = kv_events::zmq_publisher::start({cfg.cluster.kv_events, cfg.cluster.kv_events_replay, cfg.cluster.kv_events_topic});
    if (!pub) return std::move(pub).err();
    spdlog::info("KV events: publishing on {}{}", (*pub)->endpoint(),
                 (*pub)->replay_endpoint().empty() ? "" : ", replay on " + (*pub)->replay_endpoint());
    e->kv_publisher_ = std::move(*pub);
  }
  if (gpu) {
    report("uploading the model to the GPU", -1);
    auto stages = make_gpu_stages(e->model_, pc.space, e->page_tokens_);
    if (!stages) return std::move(stages).err();
    e->gpu_ = std::move(*stages);
    spdlog::info("device cuda: the layers run on {}", e->gpu_.summary);
  }
  int threads = cfg.model.compute_threads > 0 ? cfg.model.compute_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  e->pool_ = std::make_shared<kernels::compute_pool>(threads);
  if (!gpu && e->supports_kv_bits(4)) {
    // The mean keys that center q4_0 pages (model::q4_key_means): a prefill of the calibration
    // text with f16 KV, taken once per model file and ISA level on this machine and kept in a
    // small file (q4_key_file.hpp) that later loads read instead.
    report("mean keys for q4_0 KV", -1);
    std::array<std::uint64_t, 2> fp = e->fingerprint_;
    if (!reuse) {
      // The prefix cache's fingerprint was not taken (cache.mode = off); the file is keyed by it.
      const auto f0 = std::chrono::steady_clock::now();
      fp = kv::model_fingerprint(e->model_->file.bytes());
      e->model_->drop_file_pages();
      spdlog::info("model fingerprint {:016x}{:016x} for the q4_0 mean keys file ({:.2f} s)", fp[1], fp[0],
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count());
    }
    auto kept = q4_key_means_kept_for(e->model_, *e->tok_, *e->pool_, q4_key_dir(cfg, static_cast<bool>(e->ssd_)), &fp);
    if (!kept) return std::move(kept).err();
    e->q4_digest_ = kv::model_fingerprint(std::as_bytes(std::span<const float>(kept->means.m)));
    e->q4_means_ = std::make_shared<const model::q4_key_means>(std::move(kept->means));
    if (kept->read)
      spdlog::info("q4_0 KV: mean keys read from {} (digest {:016x}{:016x})", kept->file.string(), e->q4_digest_[1], e->q4_digest_[0]);
    else
      spdlog::info("q4_0 KV: mean keys taken in {:.2f} s{} (digest {:016x}{:016x})", kept->seconds,
                   kept->file.empty() ? std::string() : ", kept in " + kept->file.string(), e->q4_digest_[1], e->q4_digest_[0]);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("loaded {} as model '{}' ({}, {} layers, {} hidden, vocab {}) in {:.2f} s, device {}; KV: {} MiB ({} MiB of it for cached prefixes) "
               "in blocks of {} tokens, {} f16 blocks or {} q8_0 or {} q4_0; host tier: {} MiB; chat template: {}",
               path, e->model_id_, model::arch_name(hp.architecture), hp.n_layer, hp.n_embd, hp.n_vocab, secs, cfg.model.device, pc.budget >> 20, pc.cached_budget >> 20,
               e->page_tokens_, pc.space.capacity[0], pc.space.capacity[1], pc.space.capacity[2], e->host_budget_ >> 20,
               e->own_template_ ? "the model's" : "ChatML (none in the model)");
  return e;
}

const grammar::grammar_compiler& engine::grammars() const {
  std::call_once(grammars_once_, [this] {
    const auto t0 = std::chrono::steady_clock::now();
    grammars_ = std::make_unique<grammar::grammar_compiler>(grammar::vocabulary::of(*tok_, model_->hp.n_vocab));
    spdlog::info("grammar engine ready for {} tokens in {:.0f} ms", model_->hp.n_vocab,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  });
  return *grammars_;
}

bool engine::serves(std::string_view name) const {
  return model_names_.empty() || std::find(model_names_.begin(), model_names_.end(), name) != model_names_.end();
}

result<void> engine::set_cache_mode(config::cache_mode m) {
  using config::cache_mode;
  if (m != cache_mode::off && cfg_.cache.mode == cache_mode::off)
    return fail(errc::bad_state, "cache.mode ", config::to_string(m), " needs the RAM tier's budget, which a server started with "
                "cache.mode = off does not have: restart it with cache.mode = hot or tiered");
  if (m == cache_mode::tiered && !ssd_store_)
    return fail(errc::bad_state, "cache.mode tiered needs the SSD tier, which this server did not start (started with cache.mode = ",
                config::to_string(cfg_.cache.mode), ", or its directory could not be used)");
  mode_.store(static_cast<int>(m));
  scheduler_.tell(sched::set_cache_mode{m != cache_mode::off, m == cache_mode::tiered});
  return {};
}

bool engine::clear_host() const {
  if (!host_tier_) return false;
  host_tier_->tell(host_tier::clear{});
  return true;
}

bool engine::clear_ssd() const {
  if (!ssd_store_) return false;
  ssd_store_->tell(ssd::clear{});
  return true;
}

result<model::q4_key_means> q4_key_means_of(std::shared_ptr<const model::model> m, const tokenizer::tokenizer& tok,
                                            kernels::compute_pool& pool) {
  std::vector<std::int32_t> tokens;
  if (tok.add_bos()) tokens.push_back(tok.bos_id());
  const auto body = tok.encode(model::q4_calibration_text(), false, false);
  tokens.insert(tokens.end(), body.begin(), body.end());
  return model::calibrate_q4_keys(std::move(m), pool, tokens);
}

result<q4_kept_means> q4_key_means_kept_for(std::shared_ptr<const model::model> m, const tokenizer::tokenizer& tok,
                                            kernels::compute_pool& pool, const std::filesystem::path& dir,
                                            const std::array<std::uint64_t, 2>* fingerprint) {
  const auto fp = fingerprint ? *fingerprint : kv::model_fingerprint(m->file.bytes());
  const auto key = q4_key_file_key_for(fp, m->hp.n_layer, static_cast<std::int32_t>(m->hp.kv_dim()));
  return q4_key_means_kept(dir, key, [&] { return q4_key_means_of(m, tok, pool); });
}

std::string engine::bos_text() const { return std::string(tok_->token_text(tok_->bos_id())); }
std::string engine::eos_text() const { return std::string(tok_->token_text(tok_->eos_id())); }

void engine::start(actors::actor_system& system, metrics::registry& registry) {
  const pipeline::stage_address output = system.spawn<pipeline::output_actor>(
      "output", actors::supervision::stop_system,
      gpu_.output ? gpu_.output : std::shared_ptr<pipeline::output_compute>(std::make_shared<output_stage>(model_, pool_)),
      pipeline::sampler_factory([](const pipeline::open_sampler& o) { return std::make_unique<sequence_sampler>(o); }));
  pipeline::stage_address next = output;
  std::vector<std::shared_ptr<pipeline::layer_compute>> stages = gpu_.layers;
  std::vector<std::shared_ptr<layer_stage>> layers;
  for (int il = 0; stages.empty() && il < model_->hp.n_layer; ++il) {
    layers.push_back(std::make_shared<layer_stage>(model_, il, pool_cfg_.space, page_tokens_, pool_, state_slots(),
                                                   std::max(1, cfg_.scheduler.token_budget)));
    layers.back()->set_q4_key_means(q4_means_);
  }
  if (stages.empty()) stages.assign(layers.begin(), layers.end());
  if (cfg_.kv.prefault_tokens > 0 && !layers.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    const kv::kv_format f = kv::kv_format_from_bits(default_kv_bits_).value_or(kv::kv_format::f16);
    const std::int32_t pages = (cfg_.kv.prefault_tokens + page_tokens_ - 1) / page_tokens_;
    std::size_t bytes = 0;
    for (auto& l : layers) bytes += l->prefault(f, pages);
    spdlog::info("KV pages of {} tokens backed in {:.2f} s ({} MiB)", static_cast<std::int64_t>(pages) * page_tokens_,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), bytes >> 20);
  }
  for (int il = model_->hp.n_layer - 1; il >= 0; --il) {
    next = system.spawn<pipeline::layer_actor>("layer-" + std::to_string(il), actors::supervision::stop_system,
                                               stages[static_cast<std::size_t>(il)], next,
                                               static_cast<std::size_t>(il));
  }
  auto tok = tok_;
  sched::text_services text{
      [tok](std::int32_t t) { return tok->token_to_piece(t, false); },
      [tok](std::int32_t t) { return tok->is_eog(t); },
      [](const std::vector<std::string>& stop) { return std::make_unique<assembler>(stop); }};
  sched::scheduler_config sc;
  sc.planner.token_budget = cfg_.scheduler.token_budget;
  sc.planner.prefill_while_decoding = cfg_.scheduler.prefill_while_decoding;
  sc.planner.max_running = cfg_.scheduler.max_running;
  sc.planner.state_slots = state_slots();
  sc.planner.max_queued = cfg_.scheduler.max_queued;
  sc.planner.block_tokens = page_tokens_;
  sc.planner.max_context = max_context_;
  sc.pool = pool_cfg_;
  sc.planner.prefix_cache = cfg_.cache.mode != config::cache_mode::off;
  sc.planner.snapshots = model_->hp.has_state();
  sc.planner.snapshot_every = cfg_.cache.snapshot_every;
  // Recurrent layers' chunked delta rule: steps end where its chunks do (layer_stage sets the
  // same length), so the prefix cache on or off, a prompt gets the same bits.
  if (model_->hp.has_state()) sc.planner.chunk_align = kernels::delta_rule_chunk_for(page_tokens_);
  sc.planner.cache_ns.model = fingerprint_;
  sc.planner.cache_ns.q4_keys = q4_digest_;
  sc.n_layers = model_->hp.n_layer;
  if (ssd_) {
    ssd_stats_ = ssd::store_metrics::create(registry);
    sc.ssd = system.spawn_owning<ssd::ssd_store>("ssd-store", std::move(ssd_), sched::scheduler_address{}, *ssd_stats_);
    ssd_store_ = sc.ssd;
    sc.ssd_catalog = std::exchange(ssd_catalog_, {});
    sc.planner.ssd = true;
    sc.planner.write_through = cfg_.cache.write_through;
    ssd_state_ = ssd_stats_->state;
  } else {
    ssd_state_ = &ssd::make_state_gauge(registry);  // 0: off
  }
  if (host_budget_ > 0) {
    // An eighth of the budget (2 GiB at most) is kept as warm free buffers for the blocks the next
    // saves copy out (src/common/buffer_warmer.hpp); the tier holds blocks in the rest.
    const auto block = static_cast<std::size_t>(pool_cfg_.block_bytes[0]);
    const std::size_t warm = std::min(static_cast<std::size_t>(host_budget_) / 8, std::size_t{2} << 30) / block * block;
    if (warm > 0) {
      block_buffers::shared().set_max_free(warm + (std::size_t{64} << 20));
      warmer_ = std::make_unique<buffer_warmer>(block_buffers::shared(), block, warm);
    }
    host_stats_ = host_tier::tier_metrics::create(registry);
    sc.host = system.spawn<host_tier::host_tier>("host-tier", actors::supervision::stop_system,
                                                 host_budget_ - static_cast<std::int64_t>(warm), sc.ssd, model_->hp.n_layer,
                                                 page_tokens_, *host_stats_);
    sc.planner.host = true;
    host_tier_ = sc.host;
  }
  if (cfg_.cache.mode != config::cache_mode::off && cfg_.cache.reclaim_low > 0) {
    sc.marks = {cfg_.cache.reclaim_low, cfg_.cache.reclaim_high};
    sc.hot_cache = system.spawn<hot_cache::hot_cache>("hot-cache", actors::supervision::stop_system, sc.marks);
  }
  if (kv_publisher_) {
    sc.block_watchers.push_back(system.spawn_owning<kv_events::kv_events_actor>("kv-events", std::move(kv_publisher_), page_tokens_,
                                                                             kv_events::pool_memory_of(cfg_.model.device)));
  }
  if (!cfg_.cluster.redis.empty()) {
    directory::directory_options d;
    d.redis.seeds = *redis::parse_nodes(cfg_.cluster.redis);
    d.model = fingerprint_;
    d.block_tokens = page_tokens_;
    d.ttl = std::chrono::duration_cast<std::chrono::seconds>(cfg_.cluster.directory_ttl);
    if (!model_->hp.has_state()) {
      d.value_max = cfg_.cluster.redis_value_max;
      d.block_bytes = pool_cfg_.block_bytes;
    }
    directory_ = system.spawn<directory::directory_actor>("directory", actors::supervision::stop_system, d,
                                                          directory::directory_metrics::create(registry));
    sc.block_watchers.push_back(*directory_);
    if (!model_->hp.has_state()) {  // a model with snapshots resumes only where one is: not fetched
      kv_fetch::fetch_options f;
      f.model = fingerprint_;
      if (!cfg_.server.api_keys.empty()) f.api_key = cfg_.server.api_keys.front().key;
      f.timeout = cfg_.cluster.fetch_timeout;
      f.directory = *directory_;
      fetch_stats_ = kv_fetch::fetch_metrics::create(registry);
      fetcher_ = system.spawn<kv_fetch::fetch_actor>("kv-fetch", actors::supervision::stop_system, f, *fetch_stats_);
      sc.remote = *fetcher_;
      sc.planner.remote = true;
    }
  }
  auto m = sched::scheduler_metrics::create(registry);
  if (ssd_stats_) m.ssd_blocks_lost = ssd_stats_->blocks_lost;
  stats_ = m;
  scheduler_ = system.spawn<sched::scheduler_actor>("scheduler", actors::supervision::stop_system, sc, text, next, output, m);
  if (sc.host) sc.host->tell(host_tier::attach{scheduler_});
  if (sc.ssd) {
    // Before the ring is watched, and before any request can reach the scheduler.
    sc.ssd->tell(ssd::attach{scheduler_});
    sc.ssd->tell(ssd::ring_ready{});
  }
}

void engine::advertise(std::string url) {
  if (fetcher_) fetcher_->tell(kv_fetch::start{url});
  if (directory_) directory_->tell(directory::start{std::move(url), scheduler_});
}

bool engine::quiesce(std::chrono::milliseconds timeout) const {
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  if (!scheduler_.tell(sched::quiesce{[done] { done->set_value(); }})) return false;
  return future.wait_for(timeout) == std::future_status::ready;
}

}  // namespace strata::engine
