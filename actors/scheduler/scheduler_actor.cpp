#include "actors/scheduler/scheduler_actor.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

#include <spdlog/spdlog.h>

#include "src/common/block_buffers.hpp"

namespace strata::sched {

scheduler_metrics scheduler_metrics::create(metrics::registry& r) {
  scheduler_metrics m;
  m.running = &r.make_gauge("strata_requests_running", "Sequences in the running batch.");
  m.waiting = &r.make_gauge("strata_requests_waiting", "Requests waiting to start.");
  m.step_seconds = &r.make_histogram("strata_step_seconds", "Time of one scheduler step through the pipeline.",
                                     {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  m.batch_tokens = &r.make_histogram("strata_step_tokens", "Tokens computed per step.",
                                     {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024});
  m.batch_sequences = &r.make_histogram("strata_step_sequences", "Sequences per step.", {1, 2, 4, 8, 16, 32, 64});
  m.preemptions = &r.make_counter("strata_preemptions_total", "Sequences preempted when KV blocks ran out.");
  m.rejected = &r.make_counter("strata_requests_rejected_total", "Requests refused with 429 because the queue was full.");
  m.prompt_tokens = &r.make_counter("strata_prompt_tokens_total", "Prompt tokens of admitted requests.");
  m.generated_tokens = &r.make_counter("strata_generated_tokens_total", "Tokens generated.");
  m.kv_blocks_used = &r.make_gauge("strata_kv_blocks_used", "KV blocks held by running sequences.");
  m.kv_blocks_cached = &r.make_gauge("strata_kv_blocks_cached", "KV blocks no request uses that keep a cached prefix in RAM.");
  m.kv_evictions = &r.make_counter("strata_kv_evictions_total", "Cached KV blocks evicted from RAM.");
  m.kv_reclaimed = &r.make_counter("strata_kv_reclaimed_total",
                                   "Cached KV blocks evicted ahead of need, in the background (of strata_kv_evictions_total).");
  m.prefix_query_tokens = &r.make_counter("strata_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.");
  m.prefix_hit_tokens = &r.make_counter("strata_prefix_cache_hits_total", "Prompt tokens whose KV came from the prefix cache.");
  m.ssd_hit_tokens = &r.make_counter("strata_prefix_cache_ssd_hits_total", "Prompt tokens whose KV was restored from the SSD tier.");
  m.remote_hit_tokens = &r.make_counter("strata_prefix_cache_remote_hits_total", "Prompt tokens whose KV was fetched from other replicas.");
  m.host_hit_tokens = &r.make_counter("strata_prefix_cache_host_hits_total", "Prompt tokens whose KV was restored from the host tier.");
  m.snapshots = &r.make_gauge("strata_snapshots", "Frozen boundary snapshots of recurrent state kept in RAM.");
  m.snapshot_bytes = &r.make_gauge("strata_snapshot_bytes", "Bytes of the frozen boundary snapshots kept in RAM (within cache.hot_memory).");
  m.snapshots_taken = &r.make_counter("strata_snapshots_taken_total", "Frozen boundary snapshots taken and kept.");
  m.snapshot_restores = &r.make_counter("strata_snapshot_restores_total", "Requests that resumed from a frozen boundary snapshot.");
  m.snapshot_hit_tokens = &r.make_counter("strata_snapshot_hit_tokens_total", "Prompt tokens skipped by resuming from a snapshot.");
  for (kv::kv_format f : kv::k_kv_formats) {
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    const std::string format = f == kv::kv_format::f16 ? "f16" : f == kv::kv_format::q8_0 ? "q8_0" : "q4_0";
    const char* help = "KV blocks in RAM by format and state (in use by a request, cached, free).";
    m.blocks_in_use[i] = &r.make_gauge("strata_kv_blocks", help, "format=\"" + format + "\",state=\"in_use\"");
    m.blocks_cached[i] = &r.make_gauge("strata_kv_blocks", help, "format=\"" + format + "\",state=\"cached\"");
    m.blocks_free[i] = &r.make_gauge("strata_kv_blocks", help, "format=\"" + format + "\",state=\"free\"");
  }
  m.bytes_in_use = &r.make_gauge("strata_kv_bytes", "Bytes of KV blocks in RAM by state.", "state=\"in_use\"");
  m.bytes_cached = &r.make_gauge("strata_kv_bytes", "Bytes of KV blocks in RAM by state.", "state=\"cached\"");
  m.ttft_seconds = &r.make_histogram("strata_ttft_seconds", "Time from a request's arrival to its first generated token.",
                                     {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  m.inter_token_seconds = &r.make_histogram("strata_inter_token_seconds", "Time between consecutive tokens of a sequence.",
                                            {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  return m;
}

scheduler_actor::scheduler_actor(scheduler_config cfg, text_services text, pipeline::stage_address first_stage,
                                 pipeline::stage_address output, scheduler_metrics metrics)
    : cfg_(cfg),
      text_(std::move(text)),
      first_stage_(std::move(first_stage)),
      output_(std::move(output)),
      metrics_(metrics),
      cache_(cfg.pool ? kv::kv_cache_manager(cache_options_of(cfg.planner), *cfg.pool)
                      : kv::kv_cache_manager(cache_options_of(cfg.planner), cfg.kv_blocks)),
      planner_(cfg.planner, cache_) {
  if (!cfg_.block_watchers.empty()) cache_.observe(&block_events_);
  for (auto& r : cfg_.ssd_catalog) {
    if (r.kind == ssd::record_kind::snapshot) {
      cache_.ssd_snapshot_stored(r.hash);
    } else {
      cache_.ssd_stored(r.hash, r.parent, std::move(r.token_ids));
    }
  }
  cfg_.ssd_catalog = {};
}

void scheduler_actor::handle(submit s) {
  if (requests_.contains(s.request)) {
    s.reply_to.tell(request_rejected{s.request, 400, "duplicate request id", "duplicate_request"});
    return;
  }
  sequence seq;
  seq.id = s.request;
  seq.tokens = s.prompt;
  seq.max_new_tokens = s.settings.max_tokens;
  seq.format = s.settings.kv_format;
  seq.salt = s.settings.cache_salt;
  seq.after = s.after;
  auto admitted = planner_.submit(std::move(seq));
  if (admitted == admit_result::queue_full) {
    if (metrics_.rejected) metrics_.rejected->inc();
    s.reply_to.tell(request_rejected{s.request, 429, "the server is at capacity; retry shortly", "queue_full"});
    return;
  }
  if (admitted == admit_result::too_long) {
    s.reply_to.tell(request_rejected{
        s.request, 400,
        "prompt of " + std::to_string(s.prompt.size()) + " tokens plus max_tokens " +
            std::to_string(s.settings.max_tokens) + " exceeds the context length of " +
            std::to_string(cfg_.planner.max_context),
        "context_length_exceeded"});
    return;
  }
  s.reply_to.tell(request_admitted{s.request, 0});
  request_state st;
  st.arrived = std::chrono::steady_clock::now();
  st.reply_to = std::move(s.reply_to);
  st.text = text_.make_assembler(s.settings.stop);
  st.prompt_tokens = static_cast<std::int32_t>(s.prompt.size());
  st.settings = std::move(s.settings);
  if (metrics_.prompt_tokens) metrics_.prompt_tokens->inc(static_cast<std::uint64_t>(st.prompt_tokens));
  output_.tell(pipeline::open_sampler{s.request, st.settings.sampling, std::move(s.prompt), st.settings.compiled_grammar});
  requests_.emplace(s.request, std::move(st));
  maybe_step();
}

void scheduler_actor::handle(cancel c) {
  if (!requests_.contains(c.request)) return;
  finish(c.request, finish_reason::cancelled);
  maybe_step();
}

void scheduler_actor::handle(set_paused p) {
  planner_.set_paused(p.request, p.paused);
  if (!p.paused) maybe_step();
}

void scheduler_actor::finish(std::uint64_t id, finish_reason reason) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  request_state& st = it->second;
  if (reason != finish_reason::stop && reason != finish_reason::cancelled) {
    std::string rest = st.text->finish();
    if (!rest.empty()) st.reply_to.tell(token_event{id, 0, std::move(rest), -1, 0.0f, {}});
  }
  request_done done;
  done.request = id;
  done.reason = reason;
  done.prompt_tokens = st.prompt_tokens;
  done.completion_tokens = st.generated;
  done.stop_index = st.stop_index;
  if (const sequence* seq = planner_.find(id)) {
    done.cached_tokens = seq->cached_tokens;
    done.ssd_cached_tokens = seq->ssd_cached_tokens;
    done.host_cached_tokens = seq->host_cached_tokens;
  }
  st.reply_to.tell(std::move(done));
  planner_.finish(id);
  output_.tell(pipeline::close_sampler{id});
  requests_.erase(it);
}

void scheduler_actor::handle(step_done d) {
  in_flight_ = false;
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_started_).count();
  if (metrics_.step_seconds) metrics_.step_seconds->observe(elapsed);
  if (std::exchange(tier_step_, false)) spdlog::debug("step {} done in {:.1f} ms", next_step_ - 1, elapsed * 1e3);

  std::vector<std::int32_t> sampled;
  sampled.reserve(d.samples.size());
  for (const auto& s : d.samples) sampled.push_back(s.token);
  planner_.commit(pending_, sampled);
  std::vector<pipeline::frozen_block> exported;
  if (d.saved.size() > pending_saves_.size()) {
    exported.assign(std::make_move_iterator(d.saved.begin() + static_cast<std::ptrdiff_t>(pending_saves_.size())),
                    std::make_move_iterator(d.saved.end()));
    d.saved.resize(pending_saves_.size());
  }
  finish_exports(std::move(exported));
  persist(std::move(d.saved));
  // After the commit: a snapshot hangs on the block ending at its boundary, published by now.
  for (auto& st : d.states) {
    if (const sequence* s = planner_.find(st.seq))
      cache_.add_snapshot(st.seq, s->tokens, st.end, std::move(st.state), cache_.options().snapshots.in_reply(st.end, s->n_prompt));
  }
  persist_snapshots();

  const auto now = std::chrono::steady_clock::now();
  for (auto& s : d.samples) {
    auto it = requests_.find(s.seq);
    if (it == requests_.end()) continue;  // cancelled while the step ran
    request_state& st = it->second;
    auto* latency = st.generated == 0 ? metrics_.ttft_seconds : metrics_.inter_token_seconds;
    if (latency) latency->observe(std::chrono::duration<double>(now - (st.generated == 0 ? st.arrived : st.last_token)).count());
    st.last_token = now;
    ++st.generated;
    if (metrics_.generated_tokens) metrics_.generated_tokens->inc();
    if (!st.settings.ignore_eos && text_.is_end_of_generation(s.token)) {
      std::string rest = st.text->finish();
      if (!rest.empty()) st.reply_to.tell(token_event{s.seq, 0, std::move(rest), -1, 0.0f, {}});
      finish(s.seq, finish_reason::stop);
      continue;
    }
    auto out = st.text->feed(text_.piece(s.token));
    st.reply_to.tell(token_event{s.seq, 0, std::move(out.text), s.token, s.logprob, std::move(s.top_logprobs)});
    if (out.stopped) {
      st.stop_index = out.stop_index;
      finish(s.seq, finish_reason::stop);
    } else if (st.generated >= st.settings.max_tokens) {
      finish(s.seq, finish_reason::length);
    }
  }
  report_pressure();
  maybe_step();
  answer_quiesced();
}

void scheduler_actor::report_pressure() {
  if (!cfg_.hot_cache || pressure_reported_ || cfg_.marks.low <= 0) return;
  const kv::block_pool& pool = cache_.pool();
  const auto budget = static_cast<double>(pool.budget());
  if (static_cast<double>(pool.free_bytes()) >= cfg_.marks.low * budget) return;
  hot_cache::pressure p{pool.free_bytes(), pool.budget(), {}, self()};
  for (const auto& c : cache_.reclaim_candidates(static_cast<std::int64_t>(cfg_.marks.high * budget)))
    p.candidates.push_back({c.block, c.bytes, c.persisted});
  if (p.candidates.empty()) return;  // everything is in use: only preemption frees blocks
  pressure_reported_ = true;
  cfg_.hot_cache->tell(std::move(p));
}

void scheduler_actor::handle(hot_cache::reclaim r) {
  pressure_reported_ = false;
  const std::uint64_t before = cache_.pool().evictions();
  cache_.reclaim(r.blocks);
  if (metrics_.kv_reclaimed) metrics_.kv_reclaimed->inc(cache_.pool().evictions() - before);
  publish_gauges();
  maybe_step();
}

void scheduler_actor::handle(quiesce q) {
  quiesced_.push_back(std::move(q.done));
  maybe_step();  // the saves still pending go with a step of their own
  answer_quiesced();
}

void scheduler_actor::answer_quiesced() {
  if (in_flight_ || quiesced_.empty()) return;
  for (auto& done : std::exchange(quiesced_, {})) done();
}

void scheduler_actor::handle(set_cache_mode m) {
  planner_.set_cache_mode(m.prefix_cache, m.ssd && cfg_.ssd.has_value());
  // Off forgets every hash: what the host tier holds goes with them.
  if (!m.prefix_cache && cfg_.host) cfg_.host->tell(host_tier::clear{});
  spdlog::info("cache mode now {}", !m.prefix_cache ? "off" : m.ssd && cfg_.ssd ? "tiered" : "hot");
  publish_gauges();
  flush_block_events();  // off: the host tier's blocks are forgotten
}

void scheduler_actor::handle(clear_hot) {
  const std::int32_t blocks = cache_.pool().cached_count();
  const std::int64_t freed = cache_.clear_cached();
  spdlog::info("RAM tier cleared: {} cached blocks ({} MiB) evicted", blocks, freed >> 20);
  publish_gauges();
  maybe_step();  // write-back saves of what left RAM ride on the next step
}

void scheduler_actor::persist(std::vector<pipeline::frozen_block> saved) {
  auto saves = std::exchange(pending_saves_, {});
  for (std::size_t i = 0; i < saved.size() && i < saves.size(); ++i) {
    kv::save_item& item = saves[i];
    const auto want = cache_.pool().block_bytes(item.format);
    if (saved[i].block != item.block || static_cast<std::int64_t>(saved[i].bytes.size()) != want) {
      spdlog::error("{} tier: block {} came back from the layers with {} bytes, not {}; not kept", item.host ? "host" : "SSD",
                    item.block, saved[i].bytes.size(), want);
      if (item.host) cache_.host_dropped(item.hash);
      else cache_.ssd_forgotten(item.hash);
      continue;
    }
    if (item.host) {
      if (!cfg_.host) {
        cache_.host_dropped(item.hash);
        continue;
      }
      // Told before the copy goes: any order sent after it finds the block there.
      cache_.host_stored(item.hash);
      cfg_.host->tell(host_tier::store{kv::host_record{item.hash, item.parent, item.format, std::move(item.token_ids),
                                                       item.spill, std::move(saved[i].bytes)}});
      continue;
    }
    if (!cfg_.ssd) continue;
    ssd::record_meta meta;
    meta.hash = item.hash;
    meta.parent = item.parent;
    meta.format = item.format;
    meta.tokens = item.token_ids.empty() ? cfg_.planner.block_tokens : static_cast<std::int32_t>(item.token_ids.size());
    meta.token_ids = item.token_ids;
    meta.layers = cfg_.n_layers;
    cfg_.ssd->tell(ssd::persist{meta, std::move(saved[i].bytes)});
  }
}

void scheduler_actor::persist_snapshots() {
  for (auto& s : cache_.take_snapshot_saves()) {
    if (!cfg_.ssd || ssd_degraded_) {
      cache_.ssd_forgotten(kv::snapshot_key(s.hash));  // a snapshot is not kept for later: the next one is
      continue;
    }
    ssd::record_meta meta;
    meta.kind = ssd::record_kind::snapshot;
    meta.hash = s.hash;
    meta.parent = s.parent;
    meta.tokens = s.tokens;
    meta.layers = cfg_.n_layers;
    cfg_.ssd->tell(ssd::persist{std::move(meta), std::move(s.payload)});
  }
}

void scheduler_actor::handle(ssd_update u) {
  for (const auto& h : u.written) cache_.ssd_stored(h);
  for (const auto& h : u.not_written) cache_.ssd_forgotten(h);
  for (const auto& h : u.removed) cache_.ssd_forgotten(h);
  // Deferred blocks stay "being persisted" for the planner until they are written or lost.
  for (auto& m : u.deferred) {
    if (m.kind == ssd::record_kind::snapshot) {
      cache_.ssd_forgotten(ssd::record_key(m));
      continue;
    }
    deferred_.add(kv::save_item{-1, m.hash, m.parent, m.format, std::move(m.token_ids)});
  }
  ssd_degraded_ = u.degraded;
  std::vector<kv::block_hash> lost;
  deferred_.prune(cache_.pool(), lost);
  lose(lost);
  if (!ssd_degraded_ && !deferred_.empty()) maybe_step();  // a step carries them to the store
  flush_block_events();
}

void scheduler_actor::handle(host_update u) {
  for (const auto& h : u.dropped) cache_.host_dropped(h);
  flush_block_events();  // the blocks that left the host tier, now: no step may come soon
}

void scheduler_actor::flush_block_events() {
  if (block_events_.events.empty()) return;
  auto events = std::exchange(block_events_.events, {});
  for (std::size_t i = 0; i + 1 < cfg_.block_watchers.size(); ++i) cfg_.block_watchers[i].tell(kv_events::block_batch{events});
  cfg_.block_watchers.back().tell(kv_events::block_batch{std::move(events)});
}

void scheduler_actor::route_saves(std::vector<kv::save_item>& saves) {
  if (!cfg_.ssd) return;
  // Saves to the host tier go whatever the disk's state: put aside, then back after the others.
  const auto to_host = std::stable_partition(saves.begin(), saves.end(), [](const kv::save_item& s) { return !s.host; });
  std::vector<kv::save_item> host(std::make_move_iterator(to_host), std::make_move_iterator(saves.end()));
  saves.erase(to_host, saves.end());
  std::vector<kv::block_hash> lost;
  if (ssd_degraded_) {
    for (auto& s : saves) {
      if (cache_.pool().contains(s.hash)) {
        deferred_.add(std::move(s));
      } else {
        lost.push_back(s.hash);  // saved as RAM evicted it (write_through = false): its last chance
      }
    }
    saves.clear();
    deferred_.prune(cache_.pool(), lost);
  } else if (!deferred_.empty()) {
    for (auto& s : deferred_.take(cache_.pool(), resave_bytes_per_step, lost)) saves.push_back(std::move(s));
  }
  lose(lost);
  for (auto& s : host) saves.push_back(std::move(s));
}

void scheduler_actor::lose(const std::vector<kv::block_hash>& lost) {
  for (const auto& h : lost) cache_.ssd_forgotten(h);
  if (metrics_.ssd_blocks_lost && !lost.empty()) metrics_.ssd_blocks_lost->inc(lost.size());
}

void scheduler_actor::handle(ssd_loaded l) {
  const std::optional<kv::kv_format> format = cache_.restore_format(l.order);
  const std::int64_t want = format ? cache_.pool().block_bytes(*format) : -1;
  // Blocks count from the start of the order up to the first one missing (or not this pool's
  // block size: a record written with another kv.block_tokens): the chain computes from there.
  // A snapshot order ends with the snapshot's record: decoded, and its layer count checked.
  std::optional<kv::state_snapshot> snap;
  if (cache_.restore_wants_snapshot(l.order) && !l.payloads.empty()) {
    if (auto& p = l.payloads.back()) {
      snap = kv::decode_snapshot(*p);
      if (snap && static_cast<std::int32_t>(snap->layers.size()) != cfg_.n_layers) snap.reset();
      block_buffers::shared().give(std::move(*p));
    }
    l.payloads.pop_back();
  }
  std::int32_t n_ok = 0;
  for (const auto& p : l.payloads) {
    if (!p || static_cast<std::int64_t>(p->size()) != want) break;
    ++n_ok;
  }
  std::vector<std::int32_t> ids = planner_.restore_done(l.order, n_ok, std::move(snap));
  for (std::size_t k = 0; k < ids.size(); ++k) loads_.push_back(pipeline::frozen_block{ids[k], std::move(*l.payloads[k])});
  for (std::size_t k = ids.size(); k < l.payloads.size(); ++k)
    if (l.payloads[k]) block_buffers::shared().give(std::move(*l.payloads[k]));
  maybe_step();
}

void scheduler_actor::maybe_step() {
  if (in_flight_) {
    publish_gauges();
    return;
  }
  step_plan plan = planner_.plan();
  if (metrics_.preemptions && !plan.preempted.empty()) metrics_.preemptions->inc(plan.preempted.size());
  std::vector<kv::save_item> saves = cache_.take_saves();
  route_saves(saves);  // after plan(): the blocks it names are the ones the layers will copy out
  std::vector<kv::block_copy> copies = cache_.take_copies();
  for (auto& r : cache_.take_restores()) {
    if (r.remote && cfg_.remote) {
      const kv::kv_format f = cache_.restore_format(r.order).value_or(kv::kv_format::f16);
      cfg_.remote->tell(kv_fetch::fetch{r.order, f, cache_.pool().block_bytes(f), std::move(r.hashes), self()});
    } else if (r.host && cfg_.host) {
      cfg_.host->tell(host_tier::load{r.order, std::move(r.hashes)});
    } else if (!r.remote && !r.host && cfg_.ssd) {
      cfg_.ssd->tell(ssd::load{r.order, std::move(r.hashes)});
    }
  }
  publish_gauges();
  flush_block_events();
  if (plan.empty() && saves.empty() && copies.empty() && loads_.empty() && exports_queued_.empty()) return;

  pipeline::batch_layout layout;
  layout.step = next_step_++;
  for (const auto& s : saves) layout.save.push_back(s.block);
  pending_saves_ = std::move(saves);
  layout.copy = std::move(copies);
  layout.load = std::move(loads_);
  loads_.clear();
  add_exports(layout);
  layout.tokens.reserve(static_cast<std::size_t>(plan.n_tokens));
  for (const auto& item : plan.items) {
    const sequence* s = planner_.find(item.seq);
    const auto blocks = cache_.blocks(item.seq);
    pipeline::batch_sequence bs;
    bs.id = item.seq;
    bs.blocks.assign(blocks.begin(), blocks.end());
    bs.first_row = layout.n_rows();
    bs.n_rows = item.n_tokens;
    bs.start_pos = item.start;
    bs.sample = item.sample;
    bs.state_slot = s->state_slot;
    bs.restore = cache_.take_resume(item.seq);
    bs.snapshot = cache_.options().snapshots.at(item.start + item.n_tokens, s->n_prompt);
    layout.tokens.insert(layout.tokens.end(), s->tokens.begin() + item.start,
                         s->tokens.begin() + item.start + item.n_tokens);
    layout.seqs.push_back(std::move(bs));
  }
  if (metrics_.batch_tokens) metrics_.batch_tokens->observe(plan.n_tokens);
  if (metrics_.batch_sequences) metrics_.batch_sequences->observe(static_cast<double>(plan.items.size()));
  tier_step_ = !layout.save.empty() || !layout.load.empty() || !layout.copy.empty();
  if (tier_step_)
    spdlog::debug("step {}: {} rows of {} sequences; blocks saved {}, loaded {}, copied {}", layout.step, plan.n_tokens,
                  plan.items.size(), layout.save.size(), layout.load.size(), layout.copy.size());
  pending_ = std::move(plan);
  in_flight_ = true;
  step_started_ = std::chrono::steady_clock::now();
  first_stage_.pass_on(pipeline::forward{std::move(layout), {}, {}, self()});
}

void scheduler_actor::publish_gauges() {
  const kv::block_pool& pool = cache_.pool();
  if (metrics_.running) metrics_.running->set(static_cast<double>(planner_.running()));
  if (metrics_.waiting) metrics_.waiting->set(static_cast<double>(planner_.waiting()));
  if (metrics_.kv_blocks_used) metrics_.kv_blocks_used->set(static_cast<double>(pool.in_use()));
  if (metrics_.kv_blocks_cached) metrics_.kv_blocks_cached->set(static_cast<double>(pool.cached_count()));
  for (kv::kv_format f : kv::k_kv_formats) {
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    if (metrics_.blocks_in_use[i]) metrics_.blocks_in_use[i]->set(pool.in_use(f));
    if (metrics_.blocks_cached[i]) metrics_.blocks_cached[i]->set(pool.cached_count(f));
    if (metrics_.blocks_free[i]) metrics_.blocks_free[i]->set(pool.free_count(f));
  }
  if (metrics_.bytes_in_use) metrics_.bytes_in_use->set(static_cast<double>(pool.bytes_in_use()));
  if (metrics_.bytes_cached) metrics_.bytes_cached->set(static_cast<double>(pool.bytes_cached()));
  const planner_counters& c = planner_.counters();
  if (metrics_.prefix_query_tokens) metrics_.prefix_query_tokens->inc(c.prefix_query_tokens - published_.prefix_query_tokens);
  if (metrics_.prefix_hit_tokens) metrics_.prefix_hit_tokens->inc(c.prefix_hit_tokens - published_.prefix_hit_tokens);
  if (metrics_.ssd_hit_tokens) metrics_.ssd_hit_tokens->inc(c.ssd_hit_tokens - published_.ssd_hit_tokens);
  if (metrics_.remote_hit_tokens) metrics_.remote_hit_tokens->inc(c.remote_hit_tokens - published_.remote_hit_tokens);
  if (metrics_.host_hit_tokens) metrics_.host_hit_tokens->inc(c.host_hit_tokens - published_.host_hit_tokens);
  if (metrics_.kv_evictions) metrics_.kv_evictions->inc(pool.evictions() - published_evictions_);
  published_ = c;
  published_evictions_ = pool.evictions();
  const kv::snapshot_stats& sn = cache_.snapshot_figures();
  if (metrics_.snapshots) metrics_.snapshots->set(static_cast<double>(sn.count));
  if (metrics_.snapshot_bytes) metrics_.snapshot_bytes->set(static_cast<double>(sn.bytes));
  if (metrics_.snapshots_taken) metrics_.snapshots_taken->inc(sn.taken - published_snapshots_.taken);
  if (metrics_.snapshot_restores) metrics_.snapshot_restores->inc(sn.restores - published_snapshots_.restores);
  if (metrics_.snapshot_hit_tokens) metrics_.snapshot_hit_tokens->inc(sn.hit_tokens - published_snapshots_.hit_tokens);
  published_snapshots_ = sn;
}

void scheduler_actor::on_stop() {
  // Streams still open end cleanly: their clients get a finish, not a cut connection.
  std::vector<std::uint64_t> ids;
  for (const auto& [id, _] : requests_) ids.push_back(id);
  for (auto id : ids) finish(id, finish_reason::cancelled);
  for (auto* list : {&exports_queued_, &exports_in_flight_})
    for (auto& e : std::exchange(*list, {})) e.done(std::nullopt);
}

}  // namespace strata::sched
