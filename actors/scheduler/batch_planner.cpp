#include "actors/scheduler/batch_planner.hpp"

#include <algorithm>

namespace strata::sched {

batch_planner::batch_planner(planner_options opts, kv::block_pool& pool) : opts_(opts), pool_(pool) {
  if (opts_.ssd && !opts_.write_through) pool_.record_evictions(true);
}

admit_result batch_planner::submit(sequence s) {
  if (static_cast<int>(waiting_.size()) >= opts_.max_queued) return admit_result::queue_full;
  if (s.tokens.empty() || static_cast<std::int64_t>(s.tokens.size()) + s.max_new_tokens > opts_.max_context) {
    return admit_result::too_long;
  }
  s.n_prompt = static_cast<std::int32_t>(s.tokens.size());
  if (opts_.prefix_cache) s.hashes.reserve((s.tokens.size() + static_cast<std::size_t>(s.max_new_tokens)) / opts_.block_tokens + 1);
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

void batch_planner::release_blocks(sequence& s) {
  for (auto b : s.blocks) pool_.release(b);
  s.blocks.clear();
  s.n_published = 0;
  s.restoring = false;
}

const kv::block_hash& batch_planner::root(kv::kv_format f) {
  auto key = static_cast<std::uint8_t>(f);
  auto it = roots_.find(key);
  if (it == roots_.end()) {
    kv::cache_namespace ns = opts_.cache_ns;
    ns.format = f;
    ns.block_tokens = opts_.block_tokens;
    it = roots_.emplace(key, hasher_.root(ns)).first;
  }
  return it->second;
}

const kv::block_hash& batch_planner::parent_of(sequence& s, std::size_t i) {
  return i == 0 ? root(s.format) : s.hashes[i - 1];
}

const sequence* batch_planner::restoring(std::uint64_t order) const {
  auto o = orders_.find(order);
  if (o == orders_.end()) return nullptr;
  const sequence* s = find(o->second);
  return s && s->restoring && s->restore_order == order ? s : nullptr;
}

void batch_planner::extend_hashes(sequence& s, std::int32_t n) {
  const std::int32_t bt = opts_.block_tokens;
  n = std::min<std::int32_t>(n, static_cast<std::int32_t>(s.tokens.size()) / bt);
  while (static_cast<std::int32_t>(s.hashes.size()) < n) {
    const auto i = static_cast<std::int32_t>(s.hashes.size());
    s.hashes.push_back(hasher_.chain(parent_of(s, static_cast<std::size_t>(i)), std::span<const std::int32_t>(s.tokens).subspan(
                                                 static_cast<std::size_t>(i) * bt, static_cast<std::size_t>(bt))));
  }
}

void batch_planner::match_prefix(sequence& s) {
  if (!opts_.prefix_cache || !s.blocks.empty()) return;
  const std::int32_t bt = opts_.block_tokens;
  // The last known token is always computed: its logits give the next sample.
  const std::int32_t max_blocks = (static_cast<std::int32_t>(s.tokens.size()) - 1) / bt;
  extend_hashes(s, max_blocks);
  for (std::int32_t i = 0; i < max_blocks; ++i) {
    auto b = pool_.lookup(s.hashes[static_cast<std::size_t>(i)]);
    if (!b) break;
    s.blocks.push_back(*b);
  }
  s.n_computed = static_cast<std::int32_t>(s.blocks.size()) * bt;
  s.n_published = static_cast<std::int32_t>(s.blocks.size());
}

void batch_planner::publish_full_blocks(sequence& s) {
  if (!opts_.prefix_cache) return;
  const std::int32_t full = std::min(s.n_computed / opts_.block_tokens, static_cast<std::int32_t>(s.blocks.size()));
  if (s.n_published >= full) return;
  extend_hashes(s, full);
  for (; s.n_published < full; ++s.n_published) {
    const auto i = static_cast<std::size_t>(s.n_published);
    const kv::block_hash& parent = parent_of(s, i);
    pool_.set_hash(s.blocks[i], s.hashes[i], parent);
    if (opts_.ssd && opts_.write_through) offer_save(s.blocks[i], s.hashes[i], parent, s.format);
  }
}

void batch_planner::offer_save(std::int32_t block, const kv::block_hash& h, const kv::block_hash& parent, kv::kv_format f) {
  if (on_ssd_.contains(h) || !persisting_.insert(h).second) return;
  saves_.push_back(save_item{block, h, parent, f});
}

void batch_planner::ssd_stored(const kv::block_hash& h) {
  persisting_.erase(h);
  on_ssd_.insert(h);
}

void batch_planner::ssd_forgotten(const kv::block_hash& h) {
  persisting_.erase(h);
  on_ssd_.erase(h);
}

std::vector<save_item> batch_planner::take_saves() {
  if (opts_.ssd && !opts_.write_through) {
    for (const auto& e : pool_.take_evictions()) offer_save(e.id, e.hash, e.parent, pool_.format_of(e.id));
  }
  return std::exchange(saves_, {});
}

bool batch_planner::start_restore(sequence& s) {
  if (!opts_.ssd || on_ssd_.empty()) return false;
  const std::int32_t bt = opts_.block_tokens;
  const std::int32_t max_blocks = (static_cast<std::int32_t>(s.tokens.size()) - 1) / bt;
  if (s.n_computed != static_cast<std::int32_t>(s.blocks.size()) * bt) return false;
  extend_hashes(s, max_blocks);
  restore_order order;
  for (auto i = static_cast<std::int32_t>(s.blocks.size()); i < max_blocks; ++i) {
    const kv::block_hash& h = s.hashes[static_cast<std::size_t>(i)];
    if (!on_ssd_.contains(h)) break;
    auto b = pool_.allocate(s.format);
    if (!b) break;
    if (order.hashes.empty()) s.restore_first = static_cast<std::int32_t>(s.blocks.size());
    s.blocks.push_back(*b);
    order.hashes.push_back(h);
  }
  if (order.hashes.empty()) return false;
  order.order = next_order_++;
  order.seq = s.id;
  s.restoring = true;
  s.restore_order = order.order;
  orders_[order.order] = s.id;
  restores_.push_back(std::move(order));
  return true;
}

std::vector<std::int32_t> batch_planner::restore_done(std::uint64_t order, std::int32_t n_ok) {
  const sequence* waiting = restoring(order);
  orders_.erase(order);
  if (!waiting) return {};
  sequence& s = seqs_.at(waiting->id);
  s.restoring = false;
  const auto first = static_cast<std::size_t>(s.restore_first);
  n_ok = std::clamp<std::int32_t>(n_ok, 0, static_cast<std::int32_t>(s.blocks.size() - first));
  // What did not come back is computed: its blocks go back unhashed.
  while (s.blocks.size() > first + static_cast<std::size_t>(n_ok)) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
  std::vector<std::int32_t> loaded(s.blocks.begin() + static_cast<std::ptrdiff_t>(first), s.blocks.end());
  const std::int32_t bt = opts_.block_tokens;
  s.n_computed = static_cast<std::int32_t>(s.blocks.size()) * bt;
  // The restored blocks are published at once: the caller loads them with the very next step,
  // before anything can compute on them.
  for (auto i = first; i < s.blocks.size(); ++i) {
    pool_.set_hash(s.blocks[i], s.hashes[i], parent_of(s, i));
  }
  s.n_published = static_cast<std::int32_t>(s.blocks.size());
  const auto restored = static_cast<std::uint64_t>(n_ok) * static_cast<std::uint64_t>(bt);
  // A restore ordered at the first admission adds to what the request reports as cached.
  if (s.preemptions == 0) s.cached_tokens = s.n_computed;
  counters_.prefix_hit_tokens += restored;
  counters_.ssd_hit_tokens += restored;
  return loaded;
}

bool batch_planner::cancel(std::uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  release_blocks(it->second);
  std::erase(running_, id);
  std::erase(waiting_, id);
  seqs_.erase(it);
  return true;
}

std::int32_t batch_planner::reserve_blocks(sequence& s, std::int32_t end) {
  const std::int32_t bt = opts_.block_tokens;
  while (static_cast<std::int32_t>(s.blocks.size()) * bt < end) {
    auto b = pool_.allocate(s.format);
    if (!b) break;
    s.blocks.push_back(*b);
  }
  return std::min(end, static_cast<std::int32_t>(s.blocks.size()) * bt);
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
    release_blocks(victim);
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
    if (pending != 1 || s.paused || s.restoring || budget < 1) continue;
    while (reserve_blocks(s, s.n_computed + 1) < s.n_computed + 1) {
      if (!preempt_one(id, plan)) break;
    }
    if (reserve_blocks(s, s.n_computed + 1) < s.n_computed + 1) {
      // Nothing left to preempt: this sequence itself yields.
      preempt_one(0, plan);
      continue;
    }
    plan.items.push_back({id, s.n_computed, 1, true});
    plan.n_tokens += 1;
    ++plan.n_decode;
    --budget;
  }

  // 2. Prefill chunks of running sequences that are still in their prompt.
  auto schedule_chunk = [&](sequence& s) -> bool {
    std::int32_t total = static_cast<std::int32_t>(s.tokens.size());
    std::int32_t want = std::min(total - s.n_computed, budget);
    if (want <= 0) return false;
    std::int32_t covered = reserve_blocks(s, s.n_computed + want);
    std::int32_t n = covered - s.n_computed;
    if (n <= 0) return false;
    plan.items.push_back({s.id, s.n_computed, n, s.n_computed + n == total});
    plan.n_tokens += n;
    budget -= n;
    return true;
  };
  for (auto id : running_) {
    if (budget <= 0) break;
    sequence& s = seqs_.at(id);
    std::int32_t pending = static_cast<std::int32_t>(s.tokens.size()) - s.n_computed;
    if (pending <= 1 || s.restoring) continue;  // decoding (handled above), waiting for its sample or its restore
    bool already = std::any_of(plan.items.begin(), plan.items.end(), [&](const step_item& i) { return i.seq == id; });
    if (!already) schedule_chunk(s);
  }

  // 3. Admit waiting sequences while there is room and budget.
  while (budget > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < opts_.max_running) {
    auto id = waiting_.front();
    sequence& s = seqs_.at(id);
    match_prefix(s);
    // Admit only if at least the first chunk's blocks can be had without preempting anyone.
    std::int32_t first = std::min(static_cast<std::int32_t>(s.tokens.size()) - s.n_computed, budget);
    std::int32_t need_blocks = (s.n_computed + first + opts_.block_tokens - 1) / opts_.block_tokens -
                               static_cast<std::int32_t>(s.blocks.size());
    if (need_blocks > pool_.available(s.format)) {
      // The matched blocks go back to the cache until the sequence can start.
      release_blocks(s);
      s.n_computed = 0;
      break;
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
    if (start_restore(s)) continue;
    schedule_chunk(s);
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
    publish_full_blocks(s);
    if (has_sample && token >= 0 && s.n_computed == static_cast<std::int32_t>(s.tokens.size())) {
      s.tokens.push_back(token);
    }
  }
}

}  // namespace strata::sched
