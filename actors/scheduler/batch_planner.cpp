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
  publish_tail(s);
  for (auto b : s.blocks) pool_.release(b);
  s.blocks.clear();
  s.n_published = 0;
  s.restoring = false;
  s.restore_tail = 0;
}

template <class Live>
std::pair<const batch_planner::tail*, std::int32_t> batch_planner::best_tail(tail_map& tails, const kv::block_hash& parent,
                                                                            std::span<const std::int32_t> next, Live live) {
  auto it = tails.find(parent);
  if (it == tails.end()) return {nullptr, 0};
  const tail* best = nullptr;
  std::int32_t best_n = 0;
  for (const tail& t : it->second) {
    const std::size_t m = std::min(t.tokens.size(), next.size());
    std::size_t n = 0;
    while (n < m && t.tokens[n] == next[n]) ++n;
    if (static_cast<std::int32_t>(n) > best_n && live(t)) {
      best = &t;
      best_n = static_cast<std::int32_t>(n);
    }
  }
  return {best, best_n};
}

void batch_planner::publish_tail(sequence& s) {
  if (!opts_.prefix_cache || s.restoring) return;
  const std::int32_t bt = opts_.block_tokens;
  const std::int32_t i = s.n_computed / bt, k = s.n_computed % bt;
  if (k == 0 || i >= static_cast<std::int32_t>(s.blocks.size())) return;
  extend_hashes(s, i);
  const kv::block_hash parent = parent_of(s, static_cast<std::size_t>(i));
  const auto from = s.tokens.begin() + static_cast<std::ptrdiff_t>(i) * bt;
  std::vector<std::int32_t> tokens(from, from + k);
  const kv::block_hash h = hasher_.chain(parent, tokens);
  const std::int32_t block = s.blocks[static_cast<std::size_t>(i)];
  if (!pool_.set_hash(block, h, parent)) return;  // the same tail is cached already
  if (opts_.ssd && opts_.write_through) offer_save(block, h, parent, s.format, tokens);
  ram_tails_[parent].push_back(tail{h, std::move(tokens)});
  ++ram_tail_entries_;
}

std::span<const std::int32_t> batch_planner::tail_window(const sequence& s, std::int32_t full) const {
  const std::int32_t bt = opts_.block_tokens;
  // The last known token is always computed: its logits give the next sample.
  const std::int32_t n = std::min(bt - 1, static_cast<std::int32_t>(s.tokens.size()) - 1 - full * bt);
  if (n <= 0) return {};
  return std::span<const std::int32_t>(s.tokens).subspan(static_cast<std::size_t>(full) * bt, static_cast<std::size_t>(n));
}

bool batch_planner::take_tail(sequence& s, std::int32_t full) {
  const std::int32_t bt = opts_.block_tokens;
  const auto next = tail_window(s, full);
  if (next.empty()) return false;
  auto [t, n] = best_tail(ram_tails_, parent_of(s, static_cast<std::size_t>(full)), next,
                          [&](const tail& c) { return pool_.contains(c.hash); });
  if (!t) return false;
  // Held while the copy's block is allocated, so that making room cannot evict it. Once let go it
  // may be evicted and even handed out in this same plan: the copy still reads it first, since
  // every layer copies before it computes.
  auto from = pool_.lookup(t->hash);
  if (!from) return false;
  auto to = pool_.allocate(s.format);
  pool_.release(*from);
  if (!to) return false;
  copies_.push_back(block_copy{*from, *to});
  s.blocks.push_back(*to);
  s.n_computed = full * bt + n;
  return true;
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
  const auto full = static_cast<std::int32_t>(s.blocks.size());
  s.n_computed = full * bt;
  s.n_published = full;
  // The block after the chain may be a tail left by an earlier sequence, unless the chain goes on
  // through the SSD (whose full blocks come first).
  const bool ssd_next = opts_.ssd && full < max_blocks && on_ssd_.contains(s.hashes[static_cast<std::size_t>(full)]);
  if (!ssd_next) take_tail(s, full);
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

void batch_planner::offer_save(std::int32_t block, const kv::block_hash& h, const kv::block_hash& parent, kv::kv_format f,
                               std::vector<std::int32_t> token_ids) {
  if (on_ssd_.contains(h) || !persisting_.insert(h).second) return;
  // A tail is listed at once; it counts only once the SSD holds it (see start_restore).
  list_ssd_tail(h, parent, token_ids);
  saves_.push_back(save_item{block, h, parent, f, std::move(token_ids)});
}

void batch_planner::list_ssd_tail(const kv::block_hash& h, const kv::block_hash& parent, std::vector<std::int32_t> token_ids) {
  if (token_ids.empty() || !ssd_tail_parent_.emplace(h, parent).second) return;
  ssd_tails_[parent].push_back(tail{h, std::move(token_ids)});
}

void batch_planner::ssd_stored(const kv::block_hash& h) {
  persisting_.erase(h);
  on_ssd_.insert(h);
}

void batch_planner::ssd_stored(const kv::block_hash& h, const kv::block_hash& parent, std::vector<std::int32_t> token_ids) {
  on_ssd_.insert(h);
  list_ssd_tail(h, parent, std::move(token_ids));
}

void batch_planner::ssd_forgotten(const kv::block_hash& h) {
  persisting_.erase(h);
  on_ssd_.erase(h);
  if (auto it = ssd_tail_parent_.find(h); it != ssd_tail_parent_.end()) {
    auto list = ssd_tails_.find(it->second);
    if (list != ssd_tails_.end()) {
      std::erase_if(list->second, [&](const tail& t) { return t.hash == h; });
      if (list->second.empty()) ssd_tails_.erase(list);
    }
    ssd_tail_parent_.erase(it);
  }
}

std::vector<save_item> batch_planner::take_saves() {
  if (opts_.ssd && !opts_.write_through) {
    for (const auto& e : pool_.take_evictions()) {
      // An evicted tail is saved with its tokens (its entry is still listed: see below).
      std::vector<std::int32_t> token_ids;
      if (auto it = ram_tails_.find(e.parent); it != ram_tails_.end()) {
        for (const tail& t : it->second) {
          if (t.hash == e.hash) token_ids = t.tokens;
        }
      }
      offer_save(e.id, e.hash, e.parent, pool_.format_of(e.id), std::move(token_ids));
    }
  }
  // Tails whose blocks the pool evicted are dropped here, after their saves, once they pile up.
  if (ram_tail_entries_ > 2 * static_cast<std::size_t>(pool_.capacity()) + 64) {
    ram_tail_entries_ = 0;
    for (auto it = ram_tails_.begin(); it != ram_tails_.end();) {
      std::erase_if(it->second, [&](const tail& t) { return !pool_.contains(t.hash); });
      ram_tail_entries_ += it->second.size();
      it = it->second.empty() ? ram_tails_.erase(it) : std::next(it);
    }
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
  auto add = [&](const kv::block_hash& h) {
    auto b = pool_.allocate(s.format);
    if (!b) return false;
    if (order.hashes.empty()) s.restore_first = static_cast<std::int32_t>(s.blocks.size());
    s.blocks.push_back(*b);
    order.hashes.push_back(h);
    return true;
  };
  bool room = true;
  for (auto i = static_cast<std::int32_t>(s.blocks.size()); i < max_blocks && room; ++i) {
    const kv::block_hash& h = s.hashes[static_cast<std::size_t>(i)];
    if (!on_ssd_.contains(h)) break;
    room = add(h);
  }
  // After the full blocks, the tail on the SSD that shares most of the next tokens, if any.
  const auto full = static_cast<std::int32_t>(s.blocks.size());
  if (const auto next = tail_window(s, full); room && !next.empty() && !ssd_tails_.empty()) {
    auto [t, n] = best_tail(ssd_tails_, parent_of(s, static_cast<std::size_t>(full)), next,
                            [&](const tail& c) { return on_ssd_.contains(c.hash); });
    if (t && add(t->hash)) s.restore_tail = n;
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
  const auto ordered = static_cast<std::int32_t>(s.blocks.size() - first);
  n_ok = std::clamp<std::int32_t>(n_ok, 0, ordered);
  // What did not come back is computed: its blocks go back unhashed.
  while (s.blocks.size() > first + static_cast<std::size_t>(n_ok)) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
  std::vector<std::int32_t> loaded(s.blocks.begin() + static_cast<std::ptrdiff_t>(first), s.blocks.end());
  const std::int32_t bt = opts_.block_tokens;
  // A tail, last in the order, counts its shared tokens only; the sequence writes on into it.
  const std::int32_t tail_tokens = s.restore_tail > 0 && n_ok == ordered ? s.restore_tail : 0;
  const auto full = s.blocks.size() - (tail_tokens > 0 ? 1 : 0);
  s.restore_tail = 0;
  s.n_computed = static_cast<std::int32_t>(full) * bt + tail_tokens;
  // The restored full blocks are published at once: the caller loads them with the very next
  // step, before anything can compute on them.
  for (auto i = first; i < full; ++i) {
    pool_.set_hash(s.blocks[i], s.hashes[i], parent_of(s, i));
  }
  s.n_published = static_cast<std::int32_t>(full);
  const auto restored = static_cast<std::uint64_t>(full - first) * static_cast<std::uint64_t>(bt) + static_cast<std::uint64_t>(tail_tokens);
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
