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
                                    state_snapshot snap) {
  auto it = seqs_.find(seq);
  if (!opts_.prefix_cache || !opts_.snapshots.on || it == seqs_.end() || end % opts_.block_tokens != 0) return;
  seq_state& s = it->second;
  const std::int32_t i = end / opts_.block_tokens;
  if (i <= 0 || i > s.n_published) return;  // its block is not published: nothing to hang it on
  extend_hashes(s, tokens, i);
  const block_hash& h = s.hashes[static_cast<std::size_t>(i - 1)];
  if (snaps_.contains(h)) return;
  const std::int64_t bytes = snap.bytes();
  if (!snaps_.insert(h, std::move(snap))) return;
  if (!pool_.attach(h, bytes)) snaps_.erase(h);
  sweep_snapshots();  // attaching may have evicted older cached blocks, and their snapshots
}

std::optional<state_snapshot> kv_cache_manager::take_resume(std::uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || !it->second.resume) return std::nullopt;
  std::optional<state_snapshot> out = std::exchange(it->second.resume, std::nullopt);
  snaps_.count_restore(it->second.resume_tokens);
  return out;
}

void kv_cache_manager::sweep_snapshots() {
  for (const block_hash& h : pool_.take_detached()) snaps_.erase(h);
}

}  // namespace strata::kv
