#include "src/kv/kv_cache_manager.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace strata::kv {

kv_cache_manager::kv_cache_manager(cache_options opts, const pool_config& pool) : opts_(std::move(opts)), pool_(pool) {
  if (opts_.snapshots.on) opts_.host = false;
  pool_.record_evictions(wants_evictions());
}

kv_cache_manager::kv_cache_manager(cache_options opts, std::int32_t n_blocks)
    : opts_(std::move(opts)), pool_(n_blocks, opts_.prefix_cache ? -1 : 0) {
  if (opts_.snapshots.on) opts_.host = false;
  pool_.record_evictions(wants_evictions());
}

block_hash kv_cache_manager::chain_root(kv_format f, const cache_salt& salt) {
  // The unsalted root of each format is kept; a salted one is made anew, as a salt may come with
  // every request.
  const auto key = static_cast<std::uint8_t>(f);
  if (auto it = roots_.find(key); salt.empty() && it != roots_.end()) return it->second;
  cache_namespace ns = opts_.ns;
  ns.format = f;
  ns.block_tokens = opts_.block_tokens;
  const block_hash h = hasher_.root(ns.salted(salt));
  if (salt.empty()) roots_.emplace(key, h);
  return h;
}

void kv_cache_manager::extend_hashes(seq_state& s, std::span<const std::int32_t> tokens, std::int32_t n) {
  const std::int32_t bt = opts_.block_tokens;
  n = std::min<std::int32_t>(n, static_cast<std::int32_t>(tokens.size()) / bt);
  while (static_cast<std::int32_t>(s.hashes.size()) < n) {
    const auto i = s.hashes.size();
    s.hashes.push_back(hasher_.chain(parent_of(s, i), block_of(tokens, i)));
  }
}

std::int32_t kv_cache_manager::match(std::uint64_t seq, kv_format f, std::span<const std::int32_t> tokens,
                                     const cache_salt& salt) {
  seq_state& s = seqs_[seq];
  if (!s.blocks.empty()) throw std::logic_error("kv_cache_manager::match on a sequence that holds blocks");
  s = seq_state{};
  s.format = f;
  if (!opts_.prefix_cache) return 0;
  s.root = chain_root(f, salt);
  const std::int32_t bt = opts_.block_tokens;
  // The last known token is always computed: its logits give the next sample.
  const std::int32_t max_blocks = (static_cast<std::int32_t>(tokens.size()) - 1) / bt;
  s.hashes.reserve(tokens.size() / static_cast<std::size_t>(bt) + 1);
  extend_hashes(s, tokens, max_blocks);
  for (std::int32_t i = 0; i < max_blocks; ++i) {
    auto b = pool_.lookup(s.hashes[static_cast<std::size_t>(i)]);
    if (!b) break;
    s.blocks.push_back(*b);
  }
  const auto full = static_cast<std::int32_t>(s.blocks.size());
  s.n_published = full;
  if (opts_.snapshots.on) return resume_point(s, full);
  // The block after the chain may be a tail left by an earlier sequence, unless the chain goes on
  // through the host tier or the SSD (whose full blocks come first).
  bool below_next = false;
  if (full < max_blocks) {
    const block_hash& next = s.hashes[static_cast<std::size_t>(full)];
    below_next = (opts_.ssd && on_ssd_.contains(next)) || (opts_.host && on_host_.contains(next));
  }
  return full * bt + (below_next ? 0 : take_tail(s, tokens, full));
}

bool kv_cache_manager::can_cover(std::uint64_t seq, std::int32_t end) const {
  const seq_state& s = seqs_.at(seq);
  const std::int32_t bt = opts_.block_tokens;
  const std::int32_t need = (end + bt - 1) / bt - static_cast<std::int32_t>(s.blocks.size());
  return need <= pool_.available(s.format);
}

std::int32_t kv_cache_manager::cover(std::uint64_t seq, std::int32_t end) {
  seq_state& s = state(seq);
  const std::int32_t bt = opts_.block_tokens;
  while (static_cast<std::int32_t>(s.blocks.size()) * bt < end) {
    auto b = pool_.allocate(s.format);
    if (!b) break;
    s.blocks.push_back(*b);
  }
  return std::min(end, static_cast<std::int32_t>(s.blocks.size()) * bt);
}

void kv_cache_manager::publish(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t n_computed) {
  if (!opts_.prefix_cache) return;
  seq_state& s = state(seq);
  const std::int32_t full = std::min(n_computed / opts_.block_tokens, static_cast<std::int32_t>(s.blocks.size()));
  if (s.n_published >= full) return;
  extend_hashes(s, tokens, full);
  for (; s.n_published < full; ++s.n_published) {
    const auto i = static_cast<std::size_t>(s.n_published);
    const block_hash& parent = parent_of(s, i);
    if (pool_.set_hash(s.blocks[i], s.hashes[i], parent)) {
      list_ram(parent, s.hashes[i], block_of(tokens, i));
      announce_ram(s, i, block_of(tokens, i));
    }
    if (opts_.ssd && opts_.write_through) offer_save(s.blocks[i], s.hashes[i], parent, s.format);
  }
}

void kv_cache_manager::release(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t n_computed) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  seq_state& s = it->second;
  if (s.reply && opts_.prefix_cache && opts_.snapshots.on && s.reply_blocks <= s.n_published)
    keep_snapshot(s, s.reply_blocks, *std::exchange(s.reply, std::nullopt));
  publish_tail(s, tokens, n_computed);
  for (auto b : s.blocks) pool_.release(b);
  seqs_.erase(it);
  sweep_snapshots();
}

std::span<const std::int32_t> kv_cache_manager::blocks(std::uint64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? std::span<const std::int32_t>{} : std::span<const std::int32_t>(it->second.blocks);
}

bool kv_cache_manager::restoring(std::uint64_t seq) const {
  auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.restoring;
}

template <class Live>
std::pair<const kv_cache_manager::tail*, std::int32_t> kv_cache_manager::best_tail(const tail_map& tails, const block_hash& parent,
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

std::span<const std::int32_t> kv_cache_manager::tail_window(std::span<const std::int32_t> tokens, std::int32_t full) const {
  const std::int32_t bt = opts_.block_tokens;
  // The last known token is always computed: its logits give the next sample.
  const std::int32_t n = std::min(bt - 1, static_cast<std::int32_t>(tokens.size()) - 1 - full * bt);
  if (n <= 0) return {};
  return tokens.subspan(static_cast<std::size_t>(full) * bt, static_cast<std::size_t>(n));
}

std::int32_t kv_cache_manager::take_tail(seq_state& s, std::span<const std::int32_t> tokens, std::int32_t full) {
  const auto next = tail_window(tokens, full);
  if (next.empty()) return 0;
  auto [t, n] = best_tail(ram_blocks_, parent_of(s, static_cast<std::size_t>(full)), next,
                          [&](const tail& c) { return pool_.contains(c.hash); });
  if (!t) return 0;
  // Held while the copy's block is allocated, so that making room cannot evict it. Once let go it
  // may be evicted and even handed out in this same plan: the copy still reads it first, since
  // every layer copies before it computes.
  auto from = pool_.lookup(t->hash);
  if (!from) return 0;
  auto to = pool_.allocate(s.format);
  pool_.release(*from);
  if (!to) return 0;
  copies_.push_back(block_copy{*from, *to});
  s.blocks.push_back(*to);
  return n;
}

void kv_cache_manager::publish_tail(seq_state& s, std::span<const std::int32_t> tokens, std::int32_t n_computed) {
  // A partial block is no resume point where a snapshot is needed.
  if (!opts_.prefix_cache || s.restoring || opts_.snapshots.on) return;
  const std::int32_t bt = opts_.block_tokens;
  const std::int32_t i = n_computed / bt, k = n_computed % bt;
  if (k == 0 || i >= static_cast<std::int32_t>(s.blocks.size())) return;
  extend_hashes(s, tokens, i);
  const block_hash parent = parent_of(s, static_cast<std::size_t>(i));
  const auto from = tokens.begin() + static_cast<std::ptrdiff_t>(i) * bt;
  std::vector<std::int32_t> kept(from, from + k);
  const block_hash h = hasher_.chain(parent, kept);
  const std::int32_t block = s.blocks[static_cast<std::size_t>(i)];
  if (!pool_.set_hash(block, h, parent)) return;  // the same tail is cached already
  list_ram(parent, h, kept);
  if (opts_.ssd && opts_.write_through) offer_save(block, h, parent, s.format, std::move(kept));
}

void kv_cache_manager::list_ram(const block_hash& parent, const block_hash& h, std::span<const std::int32_t> tokens) {
  // Listed once: a hash evicted and cached again finds its entry (the same tokens) live again.
  if (!ram_listed_.insert(h).second) return;
  ram_blocks_[parent].push_back(tail{h, std::vector<std::int32_t>(tokens.begin(), tokens.end())});
}

void kv_cache_manager::offer_save(std::int32_t block, const block_hash& h, const block_hash& parent, kv_format f,
                                  std::vector<std::int32_t> token_ids) {
  if (on_ssd_.contains(h) || !persisting_.insert(h).second) return;
  // A tail is listed at once; it counts only once the SSD holds it (see restore).
  list_ssd_tail(h, parent, token_ids);
  saves_.push_back(save_item{block, h, parent, f, std::move(token_ids)});
}

void kv_cache_manager::offer_host_save(std::int32_t block, const block_hash& h, const block_hash& parent, kv_format f,
                                       std::vector<std::int32_t> token_ids, std::span<const std::int32_t> full_tokens) {
  if (on_host_.contains(h)) return;
  // What its stored event will say (a full block's tokens when RAM listed them); a tail is not
  // announced.
  host_meta meta{std::nullopt, f, {}};
  if (observer_) {
    meta.parent = known_parent(parent);
    if (token_ids.empty()) meta.token_ids.assign(full_tokens.begin(), full_tokens.end());
  }
  if (!host_saving_.try_emplace(h, std::move(meta)).second) return;
  save_item item{block, h, parent, f, {}, true, false};
  // Tiered without write-through: the SSD gets what leaves RAM, now through the host tier.
  item.spill = opts_.ssd && !opts_.write_through && !on_ssd_.contains(h) && !persisting_.contains(h);
  // On its way to the SSD from here on (a tail stays listed while the host tier passes it on).
  if (item.spill) persisting_.insert(h);
  list_ssd_tail(h, parent, token_ids);
  item.token_ids = std::move(token_ids);
  saves_.push_back(std::move(item));
}

void kv_cache_manager::host_stored(const block_hash& h) {
  auto saving = host_saving_.extract(h);
  if (!opts_.host || !on_host_.insert(h).second) return;
  if (!observer_ || ssd_tail_parent_.contains(h)) return;
  block_event e;
  e.tier = kv_tier::host;
  e.hash = h;
  if (!saving.empty()) {
    e.parent = saving.mapped().parent;
    e.format = saving.mapped().format;
    e.token_ids = std::move(saving.mapped().token_ids);
  }
  observer_->on_block(std::move(e));
}

void kv_cache_manager::host_dropped(const block_hash& h) {
  host_saving_.erase(h);
  if (on_host_.erase(h) > 0) announce_host_removed(h);
  forget_tail(h);
}

void kv_cache_manager::announce_host_removed(const block_hash& h) {
  if (!observer_ || ssd_tail_parent_.contains(h)) return;
  block_event e;
  e.what = block_event::kind::removed;
  e.tier = kv_tier::host;
  e.hash = h;
  observer_->on_block(std::move(e));
}

std::optional<block_hash> kv_cache_manager::known_parent(const block_hash& parent) const {
  // A root is never a block's hash: it is listed nowhere.
  if (ram_listed_.contains(parent) || pool_.contains(parent) || on_host_.contains(parent) || on_ssd_.contains(parent) ||
      host_saving_.contains(parent) || persisting_.contains(parent))
    return parent;
  return std::nullopt;
}

void kv_cache_manager::forget_tail(const block_hash& h) {
  if (on_ssd_.contains(h) || persisting_.contains(h) || on_host_.contains(h) || host_saving_.contains(h)) return;
  auto it = ssd_tail_parent_.find(h);
  if (it == ssd_tail_parent_.end()) return;
  auto list = ssd_tails_.find(it->second);
  if (list != ssd_tails_.end()) {
    std::erase_if(list->second, [&](const tail& t) { return t.hash == h; });
    if (list->second.empty()) ssd_tails_.erase(list);
  }
  ssd_tail_parent_.erase(it);
}

void kv_cache_manager::list_ssd_tail(const block_hash& h, const block_hash& parent, std::vector<std::int32_t> token_ids) {
  if (token_ids.empty() || !ssd_tail_parent_.emplace(h, parent).second) return;
  ssd_tails_[parent].push_back(tail{h, std::move(token_ids)});
}

void kv_cache_manager::observe(block_observer* o) {
  observer_ = o;
  announced_.clear();
  pool_.record_evictions(wants_evictions());
}

void kv_cache_manager::announce_ram(const seq_state& s, std::size_t i, std::span<const std::int32_t> token_ids) {
  if (!observer_) return;
  announced_.insert(s.hashes[i]);
  block_event e;
  e.hash = s.hashes[i];
  if (i > 0) e.parent = s.hashes[i - 1];
  e.token_ids.assign(token_ids.begin(), token_ids.end());
  e.format = s.format;
  observer_->on_block(std::move(e));
}

void kv_cache_manager::announce_ssd(block_event::kind what, const block_hash& h) {
  if (!observer_ || ssd_tail_parent_.contains(h)) return;
  block_event e;
  e.what = what;
  e.tier = kv_tier::ssd;
  e.hash = h;
  observer_->on_block(std::move(e));
}

void kv_cache_manager::ssd_stored(const block_hash& h) {
  if (ssd_snapshot_event(h, true)) return;
  persisting_.erase(h);
  if (on_ssd_.insert(h).second) announce_ssd(block_event::kind::stored, h);
}

void kv_cache_manager::ssd_stored(const block_hash& h, const block_hash& parent, std::vector<std::int32_t> token_ids) {
  list_ssd_tail(h, parent, std::move(token_ids));
  if (on_ssd_.insert(h).second) announce_ssd(block_event::kind::stored, h);
}

void kv_cache_manager::ssd_forgotten(const block_hash& h) {
  if (ssd_snapshot_event(h, false)) return;
  persisting_.erase(h);
  if (on_ssd_.erase(h) > 0) announce_ssd(block_event::kind::removed, h);
  forget_tail(h);
}

std::vector<kv_cache_manager::reclaim_candidate> kv_cache_manager::reclaim_candidates(std::int64_t target) const {
  std::vector<reclaim_candidate> out;
  std::int64_t need = target - pool_.free_bytes();
  if (need <= 0) return out;
  // Twice what is needed: the actor may prefer blocks already persisted to older ones.
  const bool needs_copy = opts_.host || (opts_.ssd && !opts_.write_through);
  auto below = [&](const block_hash& h) {
    return opts_.host ? on_host_.contains(h) || host_saving_.contains(h) : on_ssd_.contains(h) || persisting_.contains(h);
  };
  std::int64_t listed = 0;
  const std::int64_t smallest = pool_.block_bytes(kv_format::q4_0) > 0 ? pool_.block_bytes(kv_format::q4_0) : 1;
  for (const auto& c : pool_.oldest_cached(static_cast<std::size_t>(2 * need / smallest + 1))) {
    out.push_back({c.id, c.bytes, !needs_copy || below(c.hash)});
    listed += c.bytes;
    if (listed >= 2 * need) break;
  }
  return out;
}

std::int64_t kv_cache_manager::reclaim(std::span<const std::int32_t> blocks) {
  std::int64_t freed = 0;
  for (auto id : blocks) {
    const std::int64_t bytes = pool_.block_bytes(pool_.format_of(id));
    if (pool_.evict(id)) freed += bytes;
  }
  return freed;
}

void kv_cache_manager::set_mode(bool prefix_cache, bool ssd) {
  opts_.prefix_cache = prefix_cache;
  opts_.ssd = ssd;
  pool_.record_evictions(wants_evictions());
  if (prefix_cache) return;
  // What the host tier holds is forgotten with the rest (the caller empties the tier too; its
  // notices of those blocks then find nothing to report).
  for (const auto& h : on_host_) announce_host_removed(h);
  on_host_.clear();
  host_saving_.clear();
  pool_.clear_hashes();
  ram_blocks_.clear();
  ram_listed_.clear();
}

std::int64_t kv_cache_manager::clear_cached() {
  std::vector<std::int32_t> ids;
  for (const auto& c : pool_.oldest_cached(static_cast<std::size_t>(pool_.cached_count()))) ids.push_back(c.id);
  return reclaim(ids);
}

std::vector<save_item> kv_cache_manager::take_saves() {
  const bool save_evicted = opts_.ssd && !opts_.write_through;
  // With the prefix cache off (switched at run time), what the pool drops is no longer reused.
  const bool to_host = opts_.host && opts_.prefix_cache;
  for (const auto& e : pool_.take_evictions()) {
    if (observer_ && announced_.erase(e.hash) > 0) {
      block_event r;
      r.what = block_event::kind::removed;
      r.hash = e.hash;
      r.format = pool_.format_of(e.id);
      observer_->on_block(std::move(r));
    }
    if (save_evicted || to_host) {
      // An evicted tail is saved with its tokens (its entry is still listed: see sweep_ram_blocks);
      // a full block without.
      std::vector<std::int32_t> token_ids;
      std::span<const std::int32_t> full_tokens;  // for the host tier's stored event
      if (auto it = ram_blocks_.find(e.parent); it != ram_blocks_.end()) {
        for (const tail& t : it->second) {
          if (t.hash != e.hash) continue;
          if (static_cast<std::int32_t>(t.tokens.size()) < opts_.block_tokens) token_ids = t.tokens;
          else full_tokens = t.tokens;
        }
      }
      // The host tier takes it first; it passes it on to the SSD when it evicts it (spill).
      if (to_host) offer_host_save(e.id, e.hash, e.parent, pool_.format_of(e.id), std::move(token_ids), full_tokens);
      else offer_save(e.id, e.hash, e.parent, pool_.format_of(e.id), std::move(token_ids));
    }
  }
  sweep_ram_blocks();
  return std::exchange(saves_, {});
}

void kv_cache_manager::sweep_ram_blocks() {
  // Run after the evicted tails' saves have taken their tokens.
  if (ram_listed_.size() <= 2 * static_cast<std::size_t>(pool_.capacity()) + 64) return;
  for (auto it = ram_blocks_.begin(); it != ram_blocks_.end();) {
    std::erase_if(it->second, [&](const tail& t) { return !pool_.contains(t.hash) && ram_listed_.erase(t.hash) > 0; });
    it = it->second.empty() ? ram_blocks_.erase(it) : std::next(it);
  }
}

bool kv_cache_manager::restore(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t n_computed) {
  const bool ssd = opts_.ssd && !on_ssd_.empty();
  const bool host = opts_.host && !on_host_.empty();
  if (!opts_.prefix_cache || (!ssd && !host && !opts_.remote)) return false;
  seq_state& s = state(seq);
  const std::int32_t bt = opts_.block_tokens;
  const std::int32_t max_blocks = (static_cast<std::int32_t>(tokens.size()) - 1) / bt;
  if (n_computed != static_cast<std::int32_t>(s.blocks.size()) * bt) return false;
  extend_hashes(s, tokens, max_blocks);
  if (opts_.snapshots.on) return ssd && restore_to_snapshot(s, seq, max_blocks);
  // The nearer tier first: an order goes to one tier, the next one goes on from where it ended.
  if (host && restore_from_tier(s, seq, tokens, max_blocks, on_host_, true)) return true;
  if (ssd && restore_from_tier(s, seq, tokens, max_blocks, on_ssd_, false)) return true;
  return opts_.remote && restore_remote(s, seq, tokens, max_blocks);
}

bool kv_cache_manager::restore_remote(seq_state& s, std::uint64_t seq, std::span<const std::int32_t> tokens,
                                      std::int32_t max_blocks) {
  if (std::exchange(s.remote_tried, true)) return false;
  const auto held = static_cast<std::int32_t>(s.blocks.size());
  const std::int32_t n = std::min({max_blocks - held, max_remote_blocks, pool_.available(s.format)});
  if (n <= 0) return false;
  restore_order order;
  order.remote = true;
  s.restore_first = held;
  s.restore_tail = 0;
  for (auto i = static_cast<std::size_t>(held); i < static_cast<std::size_t>(held + n); ++i) {
    auto b = pool_.allocate(s.format);
    if (!b) break;
    s.blocks.push_back(*b);
    order.hashes.push_back(s.hashes[i]);
    list_ram(parent_of(s, i), s.hashes[i], block_of(tokens, i));  // counts once restore_done publishes it
  }
  if (order.hashes.empty()) return false;
  s.restore_remote = true;
  place_order(s, seq, std::move(order));
  return true;
}

bool kv_cache_manager::restore_from_tier(seq_state& s, std::uint64_t seq, std::span<const std::int32_t> tokens,
                                         std::int32_t max_blocks, const hash_set& held, bool host) {
  restore_order order;
  auto add = [&](const block_hash& h) {
    auto b = pool_.allocate(s.format);
    if (!b) return false;
    if (order.hashes.empty()) s.restore_first = static_cast<std::int32_t>(s.blocks.size());
    s.blocks.push_back(*b);
    order.hashes.push_back(h);
    return true;
  };
  bool room = true;
  for (auto i = static_cast<std::size_t>(s.blocks.size()); i < static_cast<std::size_t>(max_blocks) && room; ++i) {
    const block_hash& h = s.hashes[i];
    if (!held.contains(h)) break;
    room = add(h);
    // Listed now, while its tokens are at hand; the entry counts once restore_done publishes it.
    if (room) list_ram(parent_of(s, i), h, block_of(tokens, i));
  }
  // After the full blocks, the tail the tier holds that shares most of the next tokens, if any.
  const auto full = static_cast<std::int32_t>(s.blocks.size());
  if (const auto next = tail_window(tokens, full); room && !next.empty() && !ssd_tails_.empty()) {
    auto [t, n] = best_tail(ssd_tails_, parent_of(s, static_cast<std::size_t>(full)), next,
                            [&](const tail& c) { return held.contains(c.hash); });
    if (t && add(t->hash)) s.restore_tail = n;
  }
  if (order.hashes.empty()) return false;
  order.host = host;
  s.restore_host = host;
  if (host) s.host_keys = order.hashes;
  place_order(s, seq, std::move(order));
  return true;
}

void kv_cache_manager::place_order(seq_state& s, std::uint64_t seq, restore_order order) {
  order.order = next_order_++;
  order.seq = seq;
  s.restoring = true;
  s.restore_order = order.order;
  orders_[order.order] = seq;
  restores_.push_back(std::move(order));
}

std::optional<kv_format> kv_cache_manager::restore_format(std::uint64_t order) const {
  auto o = orders_.find(order);
  if (o == orders_.end()) return std::nullopt;
  auto it = seqs_.find(o->second);
  if (it == seqs_.end() || !it->second.restoring || it->second.restore_order != order) return std::nullopt;
  return it->second.format;
}

std::optional<restore_result> kv_cache_manager::restore_done(std::uint64_t order, std::int32_t n_ok,
                                                             std::optional<state_snapshot> snap) {
  const bool live = restore_format(order).has_value();
  auto o = orders_.find(order);
  if (o == orders_.end()) return std::nullopt;
  const std::uint64_t seq = o->second;
  orders_.erase(o);
  if (!live) return std::nullopt;
  seq_state& s = state(seq);
  s.restoring = false;
  const auto first = static_cast<std::size_t>(s.restore_first);
  const auto ordered = static_cast<std::int32_t>(s.blocks.size() - first);
  n_ok = std::clamp<std::int32_t>(n_ok, 0, ordered);
  if (s.restore_snapshot) n_ok = finish_snapshot_restore(s, n_ok, ordered, std::move(snap));
  // What did not come back is computed: its blocks go back unhashed.
  while (s.blocks.size() > first + static_cast<std::size_t>(n_ok)) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
  restore_result r;
  r.seq = seq;
  r.remote = std::exchange(s.restore_remote, false);
  r.host = std::exchange(s.restore_host, false);
  r.complete = n_ok == ordered;
  // The host tier hands each block it holds over (the pool holds it again; evicted, it is saved
  // again), and one it did not give back is not there (evicted meanwhile, its notice on the
  // way): all are forgotten, so that the chain goes on through the SSD from a miss.
  if (r.host) {
    for (const auto& h : s.host_keys) {
      if (on_host_.erase(h) > 0) announce_host_removed(h);
    }
  }
  s.host_keys.clear();
  r.loaded.assign(s.blocks.begin() + static_cast<std::ptrdiff_t>(first), s.blocks.end());
  const std::int32_t bt = opts_.block_tokens;
  // A tail, last in the order, counts its shared tokens only; the sequence writes on into it.
  const std::int32_t tail_tokens = s.restore_tail > 0 && n_ok == ordered ? s.restore_tail : 0;
  const auto full = s.blocks.size() - (tail_tokens > 0 ? 1 : 0);
  s.restore_tail = 0;
  // The restored full blocks are published at once: the caller loads them with the very next
  // step, before anything can compute on them.
  for (auto i = first; i < full; ++i) {
    if (pool_.set_hash(s.blocks[i], s.hashes[i], parent_of(s, i))) announce_ram(s, i, {});
  }
  s.n_published = static_cast<std::int32_t>(full);
  if (std::exchange(s.restore_snapshot, false) && full > first) keep_resume_snapshot(s, full);
  r.n_computed = static_cast<std::int32_t>(full) * bt + tail_tokens;
  r.restored = static_cast<std::int32_t>(full - first) * bt + tail_tokens;
  return r;
}

}  // namespace strata::kv
