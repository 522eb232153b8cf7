// kv_cache_manager's frozen boundary snapshots (see snapshot_index.hpp and the manager's header).

#include "src/kv/kv_cache_manager.hpp"

namespace strata::kv {

std::int32_t kv_cache_manager::resume_point(seq_state& s, std::int32_t full) {
  sweep_snapshots();
  std::int32_t keep = full;
  while (keep > 0 && !snaps_.contains(s.hashes[static_cast<std::size_t>(keep - 1)])) --keep;
  // The blocks after the resume point are computed again, into blocks of the sequence's own: the
  // cached ones may be shared.
  for (auto i = static_cast<std::size_t>(keep); i < s.blocks.size(); ++i) pool_.release(s.blocks[i]);
  s.blocks.resize(static_cast<std::size_t>(keep));
  s.n_published = keep;
  if (keep > 0) s.resume = *snaps_.find(s.hashes[static_cast<std::size_t>(keep - 1)]);
  s.resume_tokens = keep * opts_.block_tokens;
  return s.resume_tokens;
}

void kv_cache_manager::add_snapshot(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t end,
                                    state_snapshot snap, bool in_reply) {
  auto it = seqs_.find(seq);
  if (!opts_.prefix_cache || !opts_.snapshots.on || it == seqs_.end() || end % opts_.block_tokens != 0) return;
  seq_state& s = it->second;
  const std::int32_t i = end / opts_.block_tokens;
  if (i <= 0 || i > s.n_published) return;  // its block is not published: nothing to hang it on
  extend_hashes(s, tokens, i);
  if (in_reply) {
    s.reply = std::move(snap);
    s.reply_blocks = i;
    return;
  }
  if (s.reply && s.reply_blocks < i) s.reply.reset();  // a deeper resume point is kept: it would add nothing
  keep_snapshot(s, i, std::move(snap));
}

void kv_cache_manager::keep_snapshot(seq_state& s, std::int32_t i, state_snapshot snap) {
  const block_hash& h = s.hashes[static_cast<std::size_t>(i - 1)];
  if (snaps_.contains(h)) return;
  const std::int64_t bytes = snap.bytes();
  if (!snaps_.insert(h, std::move(snap))) return;
  if (!pool_.attach(h, bytes)) {
    snaps_.erase(h);
  } else if (opts_.ssd && !snaps_on_ssd_.contains(h) && snaps_persisting_.insert(h).second) {
    snap_saves_.push_back({h, parent_of(s, static_cast<std::size_t>(i - 1)), i * opts_.block_tokens, encode_snapshot(*snaps_.find(h))});
  }
  sweep_snapshots();  // attaching may have evicted older cached blocks, and their snapshots
}

std::optional<state_snapshot> kv_cache_manager::take_resume(std::uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || !it->second.resume) return std::nullopt;
  std::optional<state_snapshot> out = std::exchange(it->second.resume, std::nullopt);
  snaps_.count_restore(it->second.resume_tokens);
  return out;
}

bool kv_cache_manager::restore_to_snapshot(seq_state& s, std::uint64_t seq, std::int32_t max_blocks) {
  // The deepest boundary after the blocks s holds up to which the SSD has every block, with a
  // snapshot at its end (on the SSD, or still in RAM while a block before it left RAM).
  const std::size_t held = s.blocks.size();
  std::size_t deepest = held;
  for (std::size_t i = held; i < static_cast<std::size_t>(max_blocks) && on_ssd_.contains(s.hashes[i]); ++i) {
    if (snaps_on_ssd_.contains(s.hashes[i]) || snaps_.contains(s.hashes[i])) deepest = i + 1;
  }
  if (deepest == held || pool_.available(s.format) < static_cast<std::int32_t>(deepest - held)) return false;
  restore_order order;
  for (std::size_t i = held; i < deepest; ++i) {
    s.blocks.push_back(*pool_.allocate(s.format));
    order.hashes.push_back(s.hashes[i]);
  }
  const block_hash& end = s.hashes[deepest - 1];
  s.restore_first = static_cast<std::int32_t>(held);
  s.restore_tail = 0;
  s.restore_snapshot = true;
  s.restore_snapshot_ram.reset();
  if (const state_snapshot* ram = snaps_.find(end)) s.restore_snapshot_ram = *ram;
  s.restore_snapshot_from_ssd = !s.restore_snapshot_ram;
  if (s.restore_snapshot_from_ssd) order.hashes.push_back(snapshot_key(end));
  place_order(s, seq, std::move(order));
  return true;
}

bool kv_cache_manager::restore_wants_snapshot(std::uint64_t order) const {
  auto o = orders_.find(order);
  if (o == orders_.end()) return false;
  auto it = seqs_.find(o->second);
  return it != seqs_.end() && it->second.restoring && it->second.restore_order == order &&
         it->second.restore_snapshot && it->second.restore_snapshot_from_ssd;
}

std::int32_t kv_cache_manager::finish_snapshot_restore(seq_state& s, std::int32_t n_ok, std::int32_t ordered,
                                                       std::optional<state_snapshot> snap) {
  std::optional<state_snapshot> st = s.restore_snapshot_from_ssd ? std::move(snap) : std::move(s.restore_snapshot_ram);
  s.restore_snapshot_ram.reset();
  // Blocks without the state at their end are no resume point: the sequence goes on from the
  // boundary it resumed from before the order (s.resume, from RAM, or the start).
  if (!st || n_ok < ordered) {
    s.restore_snapshot = false;
    return 0;
  }
  s.resume = std::move(st);
  s.resume_tokens = (s.restore_first + ordered) * opts_.block_tokens;
  return ordered;
}

void kv_cache_manager::keep_resume_snapshot(seq_state& s, std::size_t full) {
  const block_hash& h = s.hashes[full - 1];
  if (!s.resume || snaps_.contains(h)) return;
  const std::int64_t bytes = s.resume->bytes();
  if (snaps_.insert(h, *s.resume) && !pool_.attach(h, bytes)) snaps_.erase(h);
  sweep_snapshots();
}

bool kv_cache_manager::ssd_snapshot_event(const block_hash& key, bool stored) {
  const block_hash h = snapshot_key(key);
  const bool was_persisting = snaps_persisting_.erase(h) > 0;
  if (stored) {
    if (!was_persisting) return false;
    snaps_on_ssd_.insert(h);
    return true;
  }
  return snaps_on_ssd_.erase(h) > 0 || was_persisting;
}

void kv_cache_manager::sweep_snapshots() {
  for (const block_hash& h : pool_.take_detached()) snaps_.erase(h);
}

}  // namespace strata::kv
