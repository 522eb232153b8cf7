#include "actors/scheduler/batch_planner.hpp"

#include <algorithm>
#include <utility>

namespace strata::sched {

kv::cache_options cache_options_of(const planner_options& o) {
  return kv::cache_options{.block_tokens = o.block_tokens,
                           .prefix_cache = o.prefix_cache,
                           .ns = o.cache_ns,
                           .ssd = o.ssd,
                           .write_through = o.write_through,
                           .host = o.host,
                           .remote = o.remote,
                           .snapshots = {.on = o.snapshots && o.prefix_cache,
                                         .block_tokens = o.block_tokens,
                                         .every = o.snapshot_every}};
}

batch_planner::batch_planner(planner_options opts, kv::kv_cache_manager& cache) : opts_(std::move(opts)), cache_(cache) {
  for (std::int32_t i = opts_.state_slots - 1; i >= 0; --i) free_slots_.push_back(i);
}

admit_result batch_planner::submit(sequence s) {
  if (static_cast<int>(waiting_.size()) >= opts_.max_queued) return admit_result::queue_full;
  if (s.tokens.empty() || static_cast<std::int64_t>(s.tokens.size()) + s.max_new_tokens > opts_.max_context) {
    return admit_result::too_long;
  }
  s.n_prompt = static_cast<std::int32_t>(s.tokens.size());
  auto id = s.id;
  seqs_[id] = std::move(s);
  waiting_.push_back(id);
  return admit_result::queued;
}

const sequence* batch_planner::find(std::uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

void batch_planner::set_paused(std::uint64_t id, bool paused) {
  if (auto it = seqs_.find(id); it != seqs_.end()) it->second.paused = paused;
}

void batch_planner::release(sequence& s) {
  cache_.release(s.id, s.tokens, s.n_computed);
  // The slot's state is dropped with it: a preempted sequence recomputes from position 0.
  if (s.state_slot >= 0) free_slots_.push_back(std::exchange(s.state_slot, -1));
}

std::vector<std::int32_t> batch_planner::restore_done(std::uint64_t order, std::int32_t n_ok,
                                                     std::optional<kv::state_snapshot> snap) {
  auto r = cache_.restore_done(order, n_ok, std::move(snap));
  if (!r) return {};
  sequence& s = seqs_.at(r->seq);
  s.n_computed = r->n_computed;
  // A restore ordered at the first admission adds to what the request reports as cached.
  // (Orders to several tiers add up: the host tier's, then the SSD's.)
  if (s.preemptions == 0) {
    s.cached_tokens = s.n_computed;
    if (r->host) s.host_cached_tokens += r->restored;
    else if (!r->remote) s.ssd_cached_tokens += r->restored;
  }
  counters_.prefix_hit_tokens += static_cast<std::uint64_t>(r->restored);
  (r->remote ? counters_.remote_hit_tokens : r->host ? counters_.host_hit_tokens : counters_.ssd_hit_tokens) +=
      static_cast<std::uint64_t>(r->restored);
  // The whole order came back: the chain may go on through the next tier (after the host tier the
  // SSD, after the SSD other replicas). A host order that missed goes on too: the cache forgot the
  // block it lacked, so the SSD is asked for it.
  if (!r->remote && (r->complete || r->host)) cache_.restore(r->seq, s.tokens, s.n_computed);
  return std::move(r->loaded);
}

void batch_planner::set_cache_mode(bool prefix_cache, bool ssd) {
  opts_.prefix_cache = prefix_cache;
  opts_.ssd = ssd;
  cache_.set_mode(prefix_cache, ssd);
}

bool batch_planner::cancel(std::uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  release(it->second);
  std::erase(running_, id);
  std::erase(waiting_, id);
  seqs_.erase(it);
  return true;
}

bool batch_planner::preempt_one(std::uint64_t keep, step_plan& plan) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (*it == keep) continue;
    auto id = *it;
    auto& victim = seqs_.at(id);
    // Drop anything already planned for the victim this step.
    std::erase_if(plan.items, [&](const step_item& i) {
      if (i.seq != id) return false;
      plan.n_tokens -= i.n_tokens;
      return true;
    });
    release(victim);
    victim.n_computed = 0;  // recomputed from scratch (prompt and generated tokens) when resumed
    ++victim.preemptions;
    running_.erase(std::next(it).base());
    waiting_.push_front(id);
    plan.preempted.push_back(id);
    ++counters_.preemptions;
    return true;
  }
  return false;
}

std::int32_t batch_planner::aligned_end(std::int32_t from, std::int32_t end, std::int32_t total) const {
  const std::int32_t a = opts_.chunk_align;
  if (a <= 1 || end >= total) return end;
  const std::int32_t down = end / a * a;
  if (down > from) return down;
  // No multiple within reach this step: wait for a step that has room for one (there is one
  // whenever the budget exceeds a chunk and a token for every other running sequence). A
  // sequence resumed off the multiples (from a prompt's end snapshot) runs as far as it can.
  if (from % a == 0 && opts_.token_budget >= a + opts_.max_running) return from;
  return end;
}

bool batch_planner::schedule_chunk(sequence& s, step_plan& plan, std::int32_t& budget) {
  const auto total = static_cast<std::int32_t>(s.tokens.size());
  std::int32_t want = std::min(total - s.n_computed, budget);
  // A chunk ends at the next snapshot boundary at the latest: the state is copied out there.
  want = std::min(want, cache_.options().snapshots.next_after(s.n_computed, s.n_prompt) - s.n_computed);
  want = aligned_end(s.n_computed, s.n_computed + want, total) - s.n_computed;
  if (want <= 0) return false;
  const std::int32_t n = aligned_end(s.n_computed, cache_.cover(s.id, s.n_computed + want), total) - s.n_computed;
  if (n <= 0) return false;
  plan.items.push_back({s.id, s.n_computed, n, s.n_computed + n == total});
  plan.n_tokens += n;
  budget -= n;
  return true;
}

bool batch_planner::admit_next(step_plan& plan, std::int32_t& budget) {
  if (opts_.state_slots > 0 && free_slots_.empty()) return false;
  auto id = waiting_.front();
  sequence& s = seqs_.at(id);
  // A choice waits while its sibling computes their shared prompt (one step or a few), then finds
  // the prompt's blocks in the cache; the queue behind it waits as long.
  if (s.after != 0 && opts_.prefix_cache && !s.admitted) {
    auto first = seqs_.find(s.after);
    if (first != seqs_.end() && first->second.n_computed < first->second.n_prompt) return false;
  }
  s.n_computed = cache_.match(id, s.format, s.tokens, s.salt);
  // Admit only if at least the first chunk's blocks can be had without preempting anyone.
  const std::int32_t first = std::min(static_cast<std::int32_t>(s.tokens.size()) - s.n_computed, budget);
  if (!cache_.can_cover(id, s.n_computed + first)) {
    // The matched blocks go back to the cache until the sequence can start.
    release(s);
    s.n_computed = 0;
    return false;
  }
  if (!s.admitted) {
    s.admitted = true;
    s.cached_tokens = s.n_computed;
    if (opts_.prefix_cache) {
      counters_.prefix_query_tokens += static_cast<std::uint64_t>(s.n_prompt);
      counters_.prefix_hit_tokens += static_cast<std::uint64_t>(s.n_computed);
    }
  }
  waiting_.pop_front();
  running_.push_back(id);
  if (opts_.state_slots > 0) {
    s.state_slot = free_slots_.back();
    free_slots_.pop_back();
  }
  if (!cache_.restore(id, s.tokens, s.n_computed)) schedule_chunk(s, plan, budget);
  return true;
}

step_plan batch_planner::plan() {
  step_plan plan;
  std::int32_t budget = opts_.token_budget;

  // 1. Decode: every running sequence whose prompt is done gets its next token.
  std::vector<std::uint64_t> order = running_;
  for (auto id : order) {
    auto it = seqs_.find(id);
    if (it == seqs_.end() || std::find(running_.begin(), running_.end(), id) == running_.end()) continue;
    sequence& s = it->second;
    std::int32_t pending = static_cast<std::int32_t>(s.tokens.size()) - s.n_computed;
    if (pending != 1 || s.paused || cache_.restoring(id) || budget < 1) continue;
    while (cache_.cover(id, s.n_computed + 1) < s.n_computed + 1) {
      if (!preempt_one(id, plan)) break;
    }
    if (cache_.cover(id, s.n_computed + 1) < s.n_computed + 1) {
      // Nothing left to preempt: this sequence itself yields.
      preempt_one(0, plan);
      continue;
    }
    plan.items.push_back({id, s.n_computed, 1, true});
    plan.n_tokens += 1;
    ++plan.n_decode;
    --budget;
  }

  // 2. Prefill chunks of running sequences that are still in their prompt: a smaller share
  // beside decode rows, which wait for the whole step.
  if (plan.n_decode > 0 && opts_.prefill_while_decoding > 0) budget = std::min(budget, opts_.prefill_while_decoding);
  for (auto id : running_) {
    if (budget <= 0) break;
    sequence& s = seqs_.at(id);
    std::int32_t pending = static_cast<std::int32_t>(s.tokens.size()) - s.n_computed;
    if (pending <= 1 || cache_.restoring(id)) continue;  // decoding (handled above), waiting for its sample or its restore
    bool already = std::any_of(plan.items.begin(), plan.items.end(), [&](const step_item& i) { return i.seq == id; });
    if (!already) schedule_chunk(s, plan, budget);
  }

  // 3. Admit waiting sequences while there is room and budget.
  while (budget > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < opts_.max_running) {
    if (!admit_next(plan, budget)) break;
  }

  ++counters_.steps;
  counters_.tokens_scheduled += static_cast<std::uint64_t>(plan.n_tokens);
  return plan;
}

void batch_planner::commit(const step_plan& plan, const std::vector<std::int32_t>& sampled) {
  std::size_t k = 0;
  for (const auto& item : plan.items) {
    auto it = seqs_.find(item.seq);
    bool has_sample = item.sample;
    std::int32_t token = has_sample && k < sampled.size() ? sampled[k] : -1;
    if (has_sample) ++k;
    if (it == seqs_.end()) continue;  // cancelled while the step ran
    sequence& s = it->second;
    s.n_computed = std::max(s.n_computed, item.start + item.n_tokens);
    cache_.publish(s.id, s.tokens, s.n_computed);
    if (has_sample && token >= 0 && s.n_computed == static_cast<std::int32_t>(s.tokens.size())) {
      s.tokens.push_back(token);
    }
  }
}

}  // namespace strata::sched
