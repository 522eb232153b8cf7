#pragma once
// kv_cache_manager: the KV cache as the scheduler plans with it. Plain class, no Asio, no threads
// (vLLM's KVCacheManager): it owns the block pool and every sequence's block table, finds what a
// new sequence can reuse, publishes what sequences fill, and keeps the set of blocks on the SSD.
// What must leave it (page copies, saves and restores for the SSD store) it hands out as plain
// data; the scheduler owns one, lends it to its batch_planner, and sends those orders on.
//
// It owns the pool, rather than borrowing the scheduler's, so that every reference and every hash
// in the pool changes here and only here: a block is shared only while no one writes it, and a
// cached block is listed wherever a lookup looks for it. The scheduler reads the pool (gauges,
// block sizes) through pool().
//
// Prefix match: when a sequence is admitted, its full blocks are looked up by their chained hashes
// (src/kv/prefix_hash.hpp) and the longest cached chain is taken, so it computes from the end of
// it; at least the last known token is always computed, since its logits give the next sample.
// Each block a step fills is published under its hash once the step is done, for later sequences
// (and for this one, should it be preempted and resumed).
//
// Tails: when a sequence lets go of its blocks (it ended, or was preempted), the block it was
// filling is kept as a tail: its tokens so far, listed under the hash of the chain before it, and
// cached in the pool under the hash of those tokens (so it ages and is evicted like any block).
// Full blocks are listed the same way as they are published. A sequence whose chain of full blocks
// ends takes, of the blocks listed under the end of its chain (tails, and full blocks it parts
// from inside), the one whose tokens share the longest run with its next ones, and computes from
// the end of that run. It gets a fresh block and a copy of that block's pages (take_copies(): the
// layers copy them before the step computes), so the block stays cached for every other sequence
// that shares it. So the next chat turn reuses every token it shares with what the last one
// computed: also when the answer, as the next prompt holds it, parts from the tokens generated
// (a template trims it, its text tokenizes otherwise) inside a block that generation filled.
//
// SSD tier (cache.mode = tiered): the manager keeps the set of block hashes on the SSD. After a
// sequence's RAM chain ends, the chain goes on through the SSD: fresh blocks are allocated for
// those hashes (then for the tail on the SSD sharing most of its next tokens: only tails, as a full
// block's record holds no token ids) and a restore order goes out (take_restores()); the sequence
// waits until restore_done() says how many came back, and computes the rest. Blocks to persist (each one as
// soon as it is filled with write_through, else each cached one as it is evicted from RAM) are
// handed out by take_saves(), to ride on the next step: the layers copy them out before they
// compute, so an evicted block is saved before anything overwrites it.
//
// Host tier (cache_options::host): frozen copies of blocks in host memory, under the pool (on the
// GPU the pool is HBM; this tier is host RAM) and above the SSD. Each cached block the pool evicts
// (and each hashed block released with no room to stay cached) is saved to it by value, with the
// next step, before anything overwrites its pages; blocks in use are never copied out. The manager
// keeps the set of hashes the tier holds (host_stored / host_dropped, as for the SSD), and a chain
// that ends in the pool goes on through the host tier first, then the SSD, then other replicas:
// each restore order goes to one tier (restore_order::host), the next one, once it is answered,
// goes on from where it ended. The host tier hands the blocks of an order over (they leave it). What the host tier evicts goes on to the SSD when the save says
// so (save_item::spill: tiered without write-through, and the SSD lacks it), else it is dropped.
// Not with snapshots on (those models resume only where a snapshot is; the SSD keeps them).
//
// Observer (observe()): told as each full block becomes findable in RAM, in the host tier or on
// the SSD and as it stops being so there (src/kv/block_events.hpp); each tier's events stand
// alone (a block may be in several at once). RAM evictions are reported from take_saves(), which
// the owner calls before every step; the host tier's blocks as it reports them stored
// (host_stored) and as they leave it (host_dropped, a restore order handing them over, the
// prefix cache turned off).

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/kv/block_events.hpp"
#include "src/kv/block_pool.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"
#include "src/kv/snapshot_index.hpp"

namespace strata::kv {

struct cache_options {
  std::int32_t block_tokens = 32;
  /// Reuse cached blocks (cache.mode hot or tiered); off: no hashing, no lookups, nothing kept.
  bool prefix_cache = false;
  /// The model, block size and extra keys the block hashes are chained in (format set per sequence).
  cache_namespace ns;
  /// The SSD tier is on: restore from it, and persist to it.
  bool ssd = false;
  /// Persist every block as soon as it is filled (else only cached blocks evicted from RAM).
  bool write_through = true;
  /// The host tier is on: evicted blocks are saved to it, and restored from it (see the header
  /// comment). Ignored with snapshots on.
  bool host = false;
  /// Other replicas may hold what this one lacks (the cluster directory): after the RAM and SSD
  /// tiers, a chain goes on through a remote order (restore_order::remote).
  bool remote = false;
  /// Frozen boundary snapshots (snapshot_index.hpp): on for a model with state beyond its
  /// attention KV, whose sequences then resume only at a boundary with a snapshot.
  snapshot_policy snapshots;
};

/// A block to copy out of the layers and persist.
struct save_item {
  std::int32_t block = -1;
  block_hash hash;
  block_hash parent;
  kv_format format = kv_format::f16;
  /// A partial block's tokens; empty for a full block.
  std::vector<std::int32_t> token_ids;
  /// For the host tier (an evicted block), not the SSD.
  bool host = false;
  /// Host tier: when it evicts the block, it writes it on to the SSD (which lacks it).
  bool spill = false;
};

/// Pages to copy from block to block (a cached tail into the block of the sequence reusing it).
struct block_copy {
  std::int32_t from = -1;
  std::int32_t to = -1;
};

/// Blocks to read back from the SSD for one sequence, in chain order.
struct restore_order {
  std::uint64_t order = 0;
  std::uint64_t seq = 0;
  std::vector<block_hash> hashes;
  /// From other replicas (cache_options::remote), not from the SSD: full blocks only, every one
  /// after the chain this replica holds, the first ones that come back counting.
  bool remote = false;
  /// From the host tier (cache_options::host), not the SSD.
  bool host = false;
};

/// What came back for a restore order: the blocks to load, and what the sequence now holds.
struct restore_result {
  std::uint64_t seq = 0;
  /// The blocks to load into the layers with the next step, in order.
  std::vector<std::int32_t> loaded;
  /// Tokens whose KV the sequence holds now; it computes from here.
  std::int32_t n_computed = 0;
  /// Of those, the tokens that came from the order (the SSD, or other replicas).
  std::int32_t restored = 0;
  /// The order was a remote one.
  bool remote = false;
  /// The order went to the host tier.
  bool host = false;
  /// Every block ordered came back (a chain may then go on through another tier).
  bool complete = false;
};

class kv_cache_manager {
 public:
  kv_cache_manager(cache_options opts, const pool_config& pool);
  /// A pool of n_blocks f16 blocks (every one may stay cached, none with the prefix cache off).
  kv_cache_manager(cache_options opts, std::int32_t n_blocks);

  /// Opens seq's block table (it holds nothing yet) in format f and takes what the RAM tier holds
  /// of `tokens`: the longest cached chain of full blocks, then the longest run shared with a
  /// block listed after it (see the header comment). Returns the tokens whose KV the sequence now
  /// holds.
  /// Chains are rooted in the namespace, the format and `salt`: different salts share nothing.
  std::int32_t match(std::uint64_t seq, kv_format f, std::span<const std::int32_t> tokens, const cache_salt& salt = {});
  /// Whether blocks covering positions [0, end) can be had now without taking any from anyone.
  bool can_cover(std::uint64_t seq, std::int32_t end) const;
  /// Allocates blocks until positions [0, end) are covered; returns how many positions are
  /// covered (fewer than `end` when the pool runs out: the caller preempts, it is not an error).
  std::int32_t cover(std::uint64_t seq, std::int32_t end);
  /// Goes on with seq's chain through the host tier, else the SSD, after the n_computed tokens it
  /// holds (whole blocks only): allocates blocks for the hashes stored there and orders their
  /// restore from that one tier (the caller calls again once the order is answered). True if seq
  /// now waits for that order. With snapshots on, only as far as the deepest boundary whose
  /// snapshot is on the SSD (or in RAM): the order then ends with that snapshot's key
  /// (snapshot_key), and the blocks count only if it comes back too.
  /// With cache_options::remote, when the SSD has nothing after them, the full blocks after them
  /// are ordered from other replicas instead (once per admission; not with snapshots on).
  bool restore(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t n_computed);
  /// A step computed seq's tokens up to n_computed: offers every block it filled to the pool
  /// under its hash (and, with write_through, to the SSD).
  void publish(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t n_computed);
  /// seq lets go of its blocks (ended, cancelled, preempted, or not admitted after all): the block
  /// it was filling is kept as a tail, the others go back to the pool, and its table is closed.
  /// Nothing happens for a sequence with no table.
  void release(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t n_computed);

  /// seq's block table: block i holds positions [i*block_tokens, (i+1)*block_tokens).
  std::span<const std::int32_t> blocks(std::uint64_t seq) const;
  /// seq waits for a restore order.
  bool restoring(std::uint64_t seq) const;

  /// SSD tier: the block with this hash is on the disk (written, or found at start) / is not
  /// (removed, or its write failed). A partial block found at start comes with its parent and
  /// its token ids (one written since is known from its save).
  void ssd_stored(const block_hash& h);
  void ssd_stored(const block_hash& h, const block_hash& parent, std::vector<std::int32_t> token_ids);
  void ssd_forgotten(const block_hash& h);
  bool on_ssd(const block_hash& h) const { return on_ssd_.contains(h); }
  /// Host tier: the block with this hash was handed to it (the caller sends its frozen copy now:
  /// any order sent after it finds it there) / has left it (evicted, or the copy failed).
  void host_stored(const block_hash& h);
  void host_dropped(const block_hash& h);
  bool on_host(const block_hash& h) const { return on_host_.contains(h); }
  /// Blocks the host tier holds, as far as the manager knows.
  std::size_t host_count() const { return on_host_.size(); }
  /// The first `n_ok` blocks of an order came back (the caller loads them into the layers with
  /// the next step); the rest will be computed. Empty when the order is stale (its sequence let
  /// go of its blocks meanwhile).
  /// `snap`: the snapshot the order ends with (restore_wants_snapshot), decoded; nullopt when it
  /// did not come back (a miss: the sequence computes from where it stood before the order).
  std::optional<restore_result> restore_done(std::uint64_t order, std::int32_t n_ok,
                                             std::optional<state_snapshot> snap = std::nullopt);
  /// Whether the order's last key is a snapshot's (read back by the SSD tier like a block).
  bool restore_wants_snapshot(std::uint64_t order) const;
  /// SSD tier: the snapshot at the end of block h is on the disk (found at start).
  void ssd_snapshot_stored(const block_hash& h) { snaps_on_ssd_.insert(h); }
  bool snapshot_on_ssd(const block_hash& h) const { return snaps_on_ssd_.contains(h); }
  /// Snapshots to write to the SSD tier (tiered mode), taken since the last call; the caller
  /// sends them. Each one's outcome comes back through ssd_stored / ssd_forgotten of its key.
  struct snapshot_save {
    block_hash hash;
    block_hash parent;
    std::int32_t tokens = 0;
    std::vector<std::byte> payload;
  };
  std::vector<snapshot_save> take_snapshot_saves() { return std::exchange(snap_saves_, {}); }
  /// The KV format of the blocks a pending order restores; empty when the order is stale.
  std::optional<kv_format> restore_format(std::uint64_t order) const;

  /// The blocks to save with the next step (see the header comment); the caller sends them.
  std::vector<save_item> take_saves();
  /// Page copies to make with the next step, before it computes (see the header comment).
  std::vector<block_copy> take_copies() { return std::exchange(copies_, {}); }
  /// Restore orders made since the last call; the caller sends them to the SSD store.
  std::vector<restore_order> take_restores() { return std::exchange(restores_, {}); }

  /// Background reclaim (the hot_cache actor decides; see DESIGN.md): the cached blocks, least
  /// recently used first, whose eviction would bring the pool's free bytes up to `target`, each
  /// marked whether its KV is already on the SSD (or needs no copy there: no SSD tier, or
  /// write-through). Empty when the free bytes reach `target` already.
  struct reclaim_candidate {
    std::int32_t block = -1;
    std::int64_t bytes = 0;
    bool persisted = false;
  };
  std::vector<reclaim_candidate> reclaim_candidates(std::int64_t target) const;
  /// Evicts those of `blocks` that are still cached (a hit may have taken one back meanwhile);
  /// their saves, where the SSD lacks them, go with the next step. Returns the bytes freed.
  std::int64_t reclaim(std::span<const std::int32_t> blocks);

  /// Snapshots (cache_options::snapshots): keeps the state seq had after position end - 1 (a
  /// block boundary it computed and published) under the hash of the block ending there, its
  /// bytes attached to that block. Dropped when one is kept there already or the block is gone.
  /// One `in_reply` (snapshot_policy::in_reply) stays with the sequence instead, replacing the
  /// one before it, and is kept so when the sequence lets go of its blocks.
  void add_snapshot(std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t end, state_snapshot s,
                    bool in_reply = false);
  /// The snapshot seq's match resumed from, a copy of its own, taken once (the layers load it
  /// into the sequence's slot with its first step); empty when it starts from position 0.
  std::optional<state_snapshot> take_resume(std::uint64_t seq);
  const snapshot_stats& snapshot_figures() const { return snaps_.stats(); }
  /// cache.mode changed at run time: reuse cached blocks or not, use the SSD tier or not (only
  /// where it exists). Turning the prefix cache off forgets every hash and empties the RAM tier,
  /// so nothing computed before is reused once it is turned on again.
  void set_mode(bool prefix_cache, bool ssd);
  /// Evicts every cached block (the admin's "clear the RAM tier"); blocks in use stay. Their
  /// saves, where the SSD lacks them (write-back), go with the next step. Returns the bytes freed.
  std::int64_t clear_cached();

  /// The block holding hash h, with a reference that keeps it (and its hash) until unpin(): for
  /// a copy of its pages to leave the replica (GET /internal/kv). Empty when RAM lacks it.
  std::optional<std::int32_t> pin(const block_hash& h) { return opts_.prefix_cache ? pool_.lookup(h) : std::nullopt; }
  void unpin(std::int32_t block) { pool_.release(block); }

  const block_pool& pool() const { return pool_; }
  const cache_options& options() const { return opts_; }

  /// Reports block events to `o` from now on (nullptr: to no one). `o` must outlive the manager
  /// or be unset first.
  void observe(block_observer* o);

 private:
  /// One sequence's share of the cache.
  struct seq_state {
    kv_format format = kv_format::f16;
    /// The hash the sequence's chain starts from (see chain_root).
    block_hash root;
    std::vector<std::int32_t> blocks;
    /// Hashes of the first hashes.size() full blocks (computed as their tokens become known).
    std::vector<block_hash> hashes;
    /// Blocks [0, n_published) have been offered to the pool under their hash.
    std::int32_t n_published = 0;
    /// Waiting for blocks [restore_first, blocks.size()) to come back from the SSD (order restore_order).
    bool restoring = false;
    std::uint64_t restore_order = 0;
    std::int32_t restore_first = 0;
    /// The order's last block is a partial block of this many tokens (0: every block is full).
    std::int32_t restore_tail = 0;
    /// The snapshot the match resumed from (with snapshots on), until take_resume(), and the
    /// tokens it spares.
    std::optional<state_snapshot> resume;
    std::int32_t resume_tokens = 0;
    /// The latest snapshot taken in the reply, at the end of full block reply_blocks; kept in the
    /// cache when the sequence lets go (its bytes count against no budget until then).
    std::optional<state_snapshot> reply;
    std::int32_t reply_blocks = 0;
    /// A restore order that ends at a snapshot: from the SSD (its key is the order's last), or a
    /// copy from RAM taken when the order was made.
    bool restore_snapshot = false;
    bool restore_snapshot_from_ssd = false;
    std::optional<state_snapshot> restore_snapshot_ram;
    /// The order in flight is a remote one; one has been placed since the match.
    bool restore_remote = false;
    bool remote_tried = false;
    /// The order in flight goes to the host tier; its keys (a miss there is forgotten, so that
    /// the chain goes on through the SSD).
    bool restore_host = false;
    std::vector<block_hash> host_keys;
  };
  /// A block listed for the reuse of part of it: a partial one (its hash chained like a full
  /// block's, over fewer tokens) or, in RAM, a full one; its hash and its tokens.
  struct tail {
    block_hash hash;
    std::vector<std::int32_t> tokens;
  };
  using tail_map = std::unordered_map<block_hash, std::vector<tail>, block_hash_hasher>;
  using hash_set = std::unordered_set<block_hash, block_hash_hasher>;

  /// The hash every chain of format f starts from: the root of the namespace. The one place a
  /// sequence's chain is seeded.
  block_hash chain_root(kv_format f, const cache_salt& salt);
  /// The hash block i of s is chained to: the root for the first block.
  static const block_hash& parent_of(const seq_state& s, std::size_t i) { return i == 0 ? s.root : s.hashes[i - 1]; }
  /// The tokens of full block i.
  std::span<const std::int32_t> block_of(std::span<const std::int32_t> tokens, std::size_t i) const {
    const auto bt = static_cast<std::size_t>(opts_.block_tokens);
    return tokens.subspan(i * bt, bt);
  }
  /// Makes sure s.hashes covers the first n full blocks of tokens.
  void extend_hashes(seq_state& s, std::span<const std::int32_t> tokens, std::int32_t n);
  /// The tokens after the first `full` blocks that a tail may hold for a sequence: up to a
  /// block's worth, short of the last known token. Empty when there are none.
  std::span<const std::int32_t> tail_window(std::span<const std::int32_t> tokens, std::int32_t full) const;
  /// The block listed under `parent` sharing the longest run with `next` (among those `live`
  /// accepts), and the run's length; {nullptr, 0} when none shares a token.
  template <class Live>
  static std::pair<const tail*, std::int32_t> best_tail(const tail_map& tails, const block_hash& parent,
                                                       std::span<const std::int32_t> next, Live live);
  /// Reuses the block listed in RAM after s's first `full` blocks that shares most of its next
  /// tokens: a fresh block joins s's table, a copy of the listed block's pages into it is queued.
  /// Returns the tokens shared, 0 on a miss (or when no block is free).
  std::int32_t take_tail(seq_state& s, std::span<const std::int32_t> tokens, std::int32_t full);
  /// Keeps the block s was filling as a tail; called before s lets go of it.
  void publish_tail(seq_state& s, std::span<const std::int32_t> tokens, std::int32_t n_computed);
  /// Lists a block cached in RAM (or on its way there) under its parent, unless it is listed.
  void list_ram(const block_hash& parent, const block_hash& h, std::span<const std::int32_t> tokens);
  /// Lists a tail (token_ids not empty) as stored on the SSD, or on its way there.
  void list_ssd_tail(const block_hash& h, const block_hash& parent, std::vector<std::int32_t> token_ids);
  /// Queues a save of an evicted block to the host tier, unless it holds it or it is on its way.
  /// `full_tokens`: a full block's tokens, for its stored event (empty when not known).
  void offer_host_save(std::int32_t block, const block_hash& h, const block_hash& parent, kv_format f,
                       std::vector<std::int32_t> token_ids, std::span<const std::int32_t> full_tokens = {});
  /// Drops a tail's listing once no lower tier holds it, nor will.
  void forget_tail(const block_hash& h);
  /// Whether the pool keeps a log of its evictions: someone needs them.
  bool wants_evictions() const { return observer_ != nullptr || opts_.host || (opts_.ssd && !opts_.write_through); }
  /// Queues a save of a block, unless the SSD has it or it is on its way.
  void offer_save(std::int32_t block, const block_hash& h, const block_hash& parent, kv_format f,
                  std::vector<std::int32_t> token_ids = {});
  /// Drops the RAM listings whose blocks the pool evicted, once they pile up.
  void sweep_ram_blocks();
  /// With snapshots on: cuts s's matched chain of `full` blocks back to the deepest boundary with
  /// a snapshot (letting go of the blocks after it) and keeps a copy of it in s.resume. Returns
  /// the tokens s holds then.
  std::int32_t resume_point(seq_state& s, std::int32_t full);
  /// Forgets the snapshots whose blocks the pool dropped.
  void sweep_snapshots();
  /// Keeps snap as the snapshot at the end of s's full block i (1-based), its bytes attached to
  /// that block, and sends it to the SSD tier where there is one.
  void keep_snapshot(seq_state& s, std::int32_t i, state_snapshot snap);
  /// restore() from the tier holding `held` (the host tier, or the SSD), without snapshots: the
  /// blocks it holds after s's chain, then the tail it holds sharing most of the next tokens.
  bool restore_from_tier(seq_state& s, std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t max_blocks,
                         const hash_set& held, bool host);
  /// restore() from other replicas: every full block after what s holds, up to max_remote_blocks.
  bool restore_remote(seq_state& s, std::uint64_t seq, std::span<const std::int32_t> tokens, std::int32_t max_blocks);
  /// The most blocks one remote order asks for.
  static constexpr std::int32_t max_remote_blocks = 256;
  /// Numbers `order` for seq and queues it (take_restores); s waits for it.
  void place_order(seq_state& s, std::uint64_t seq, restore_order order);
  /// restore() with snapshots on (see there).
  bool restore_to_snapshot(seq_state& s, std::uint64_t seq, std::int32_t max_blocks);
  /// Finishes a snapshot order in restore_done: the blocks count only with their snapshot; when
  /// they do, it becomes s's resume point (and is kept in RAM). Returns n_ok, or 0 on a miss.
  std::int32_t finish_snapshot_restore(seq_state& s, std::int32_t n_ok, std::int32_t ordered,
                                       std::optional<state_snapshot> snap);
  /// Keeps s's resume snapshot (restored from the SSD) in RAM too, on the block ending at it.
  void keep_resume_snapshot(seq_state& s, std::size_t full);
  /// An SSD answer about `key` when it is a snapshot's (true: handled).
  bool ssd_snapshot_event(const block_hash& key, bool stored);
  seq_state& state(std::uint64_t seq) { return seqs_.at(seq); }
  /// Tells the observer that full block i of s's chain is in RAM now (its tokens, when known).
  void announce_ram(const seq_state& s, std::size_t i, std::span<const std::int32_t> token_ids);
  /// Tells the observer of a change on the SSD tier, for a full block (not a tail).
  void announce_ssd(block_event::kind what, const block_hash& h);
  /// Tells the observer that full block h (not a tail) left the host tier (stored: see host_stored).
  void announce_host_removed(const block_hash& h);
  /// The parent to report for a block chained to `parent`: empty when that is a chain's root (no
  /// block the manager knows of has that hash), as for a chain's first block in RAM.
  std::optional<block_hash> known_parent(const block_hash& parent) const;

  cache_options opts_;
  block_pool pool_;
  prefix_hasher hasher_;
  std::unordered_map<std::uint8_t, block_hash> roots_;
  std::unordered_map<std::uint64_t, seq_state> seqs_;
  snapshot_index snaps_;
  /// Snapshots on the SSD, and being written there, by their block's hash; saves to send.
  hash_set snaps_on_ssd_;
  hash_set snaps_persisting_;
  std::vector<snapshot_save> snap_saves_;
  hash_set on_ssd_;
  hash_set persisting_;  // asked to persist, no answer yet
  std::vector<save_item> saves_;
  std::vector<block_copy> copies_;
  std::vector<restore_order> restores_;
  std::unordered_map<std::uint64_t, std::uint64_t> orders_;  // restore order -> sequence
  std::uint64_t next_order_ = 1;
  /// Blocks cached in the pool (tails and full ones), by parent, and the hashes listed there. An
  /// entry whose hash the pool does not hold (evicted, or not restored yet) is stale; stale entries
  /// are skipped by lookups, and dropped all at once when they pile up.
  tail_map ram_blocks_;
  hash_set ram_listed_;
  /// What the host tier's events say of a block on its way there, known when its save is queued.
  struct host_meta {
    std::optional<block_hash> parent;
    kv_format format = kv_format::f16;
    std::vector<std::int32_t> token_ids;
  };
  /// Blocks the host tier holds, and those on their way there (saved with the next step).
  hash_set on_host_;
  std::unordered_map<block_hash, host_meta, block_hash_hasher> host_saving_;
  /// Tails below RAM (on the SSD or in the host tier, or on their way), by parent (only those in
  /// on_ssd_ / on_host_ are restored from either), and the parent of each (to forget one by its
  /// hash).
  tail_map ssd_tails_;
  std::unordered_map<block_hash, block_hash, block_hash_hasher> ssd_tail_parent_;
  block_observer* observer_ = nullptr;
  /// Full blocks the observer was told are in RAM (an eviction of one of them is reported).
  hash_set announced_;
};

}  // namespace strata::kv
