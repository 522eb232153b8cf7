#pragma once
// batch_planner: continuous batching policy in the vLLM v1 style. Plain class, no Asio: the
// scheduler actor owns one and asks it for each step's plan.
//
// Each step has one token budget. Running sequences that are decoding get their next token first;
// what is left goes to chunks of prompts (running ones still in prefill, then waiting ones in
// arrival order), so a long prompt never holds running streams back by more than one chunk.
// When the KV pool runs out, the most recently admitted running sequence is preempted: its blocks
// are released and it goes back to the front of the queue to be recomputed later.
//
// Prefix reuse: when a sequence is admitted, the planner looks its full prompt blocks up by their
// chained hashes (src/kv/prefix_hash.hpp) and takes the longest cached chain, so its first chunk
// starts after it; at least the last prompt token is always computed, since its logits give the
// first sample. Each block that a step fills is published under its hash once the step is done,
// for later requests (and for this one, should it be preempted and resumed).
//
// Partial blocks: when a sequence ends (or is preempted), the block it was filling is kept as a
// tail: its tokens so far, listed under the hash of the chain before it, and cached in the pool
// (under the hash of those tokens, so that it ages and is evicted like any block). A prompt whose
// chain of full blocks ends there takes the tail whose tokens share the longest run with its
// next ones, and computes from the end of that run: the next chat turn, or the same document with
// a different question, reuses every token it shares, not only whole blocks. The sequence gets a
// fresh block and a copy of the tail's pages (take_copies(): the layers copy them before the step
// computes), so the tail stays cached for every other request that shares it.
//
// SSD tier (cache.mode = tiered): the planner keeps the set of block hashes on the SSD. After a
// sequence's RAM chain ends, the chain goes on through the SSD: fresh blocks are allocated for
// those hashes and a restore order goes out; the sequence waits (others keep computing) until
// restore_done() says how many came back, and computes the rest. Blocks to persist (each one as
// soon as it is filled with write_through, else each cached one as it is evicted from RAM) are
// handed out by take_saves(), to ride on the next step: the layers copy them out before they
// compute, so an evicted block is saved before anything overwrites it.

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/kv/block_pool.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::sched {

struct planner_options {
  int token_budget = 512;
  int max_running = 16;
  int max_queued = 256;
  int block_tokens = 32;
  /// Longest sequence (prompt + generated) the model serves.
  int max_context = 4096;
  /// Reuse cached prefix blocks (cache.mode hot or tiered); off: no hashing, no lookups.
  bool prefix_cache = false;
  /// The model, block size and extra keys the block hashes are chained in (format set per sequence).
  kv::cache_namespace cache_ns;
  /// The SSD tier is on: restore from it, and persist to it.
  bool ssd = false;
  /// Persist every block as soon as it is filled (else only cached blocks evicted from RAM).
  bool write_through = true;
};

/// One request's sequence as the planner sees it.
struct sequence {
  std::uint64_t id = 0;
  /// Prompt followed by the tokens generated so far.
  std::vector<std::int32_t> tokens;
  std::int32_t n_prompt = 0;
  std::int32_t max_new_tokens = 16;
  /// Tokens whose KV is in the cache; the next step computes from here.
  std::int32_t n_computed = 0;
  /// The block table: block i holds positions [i*block_tokens, (i+1)*block_tokens).
  std::vector<std::int32_t> blocks;
  /// A slow client asked to pause: no decode steps until it resumes.
  bool paused = false;
  int preemptions = 0;
  /// The KV format of the sequence's blocks; part of every block hash.
  kv::kv_format format = kv::kv_format::f16;
  /// Prompt tokens whose KV came from the cache when the request was first admitted.
  std::int32_t cached_tokens = 0;
  bool admitted = false;
  /// Hashes of the first hashes.size() full blocks (computed as their tokens become known).
  std::vector<kv::block_hash> hashes;
  /// Blocks [0, n_published) have been offered to the pool under their hash.
  std::int32_t n_published = 0;
  /// Waiting for blocks [restore_first, blocks.size()) to come back from the SSD (order restore_order).
  bool restoring = false;
  std::uint64_t restore_order = 0;
  std::int32_t restore_first = 0;
  /// The order's last block is a partial block of this many tokens (0: every block is full).
  std::int32_t restore_tail = 0;
};

/// A block to copy out of the layers and persist.
struct save_item {
  std::int32_t block = -1;
  kv::block_hash hash;
  kv::block_hash parent;
  kv::kv_format format = kv::kv_format::f16;
  /// A partial block's tokens; empty for a full block.
  std::vector<std::int32_t> token_ids;
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
  std::vector<kv::block_hash> hashes;
};

/// One sequence's share of a step: compute tokens[start, start + n_tokens).
struct step_item {
  std::uint64_t seq = 0;
  std::int32_t start = 0;
  std::int32_t n_tokens = 0;
  /// The chunk reaches the end of the known tokens: sample the next one from its last logits.
  bool sample = false;
};

struct step_plan {
  std::vector<step_item> items;
  std::vector<std::uint64_t> preempted;
  std::int32_t n_tokens = 0;
  int n_decode = 0;
  bool empty() const { return items.empty(); }
};

enum class admit_result {
  queued,
  /// The waiting queue is full: the API answers 429.
  queue_full,
  /// The prompt plus max_new_tokens exceeds the context length.
  too_long,
};

struct planner_counters {
  std::uint64_t steps = 0;
  std::uint64_t preemptions = 0;
  std::uint64_t tokens_scheduled = 0;
  /// Prompt tokens of admitted requests looked up in the prefix cache, and those found.
  std::uint64_t prefix_query_tokens = 0;
  std::uint64_t prefix_hit_tokens = 0;
  /// Of those, the tokens restored from the SSD.
  std::uint64_t ssd_hit_tokens = 0;
};

class batch_planner {
 public:
  batch_planner(planner_options opts, kv::block_pool& pool);

  admit_result submit(sequence s);
  /// Removes a sequence wherever it is and releases its blocks. False if unknown.
  bool cancel(std::uint64_t id);
  /// Ends a finished sequence (same as cancel, counted separately by the caller).
  bool finish(std::uint64_t id) { return cancel(id); }
  void set_paused(std::uint64_t id, bool paused);

  /// The next step. Allocates the blocks its items need; may preempt.
  step_plan plan();
  /// Records that the plan ran: advances n_computed; `sampled[i]` is the token drawn for the i-th
  /// item with sample=true (in plan order), appended to that sequence.
  void commit(const step_plan& plan, const std::vector<std::int32_t>& sampled);

  /// SSD tier: the block with this hash is on the disk (written, or found at start) / is not
  /// (removed, or its write failed). A partial block found at start comes with its parent and
  /// its token ids (one written since is known from its save).
  void ssd_stored(const kv::block_hash& h);
  void ssd_stored(const kv::block_hash& h, const kv::block_hash& parent, std::vector<std::int32_t> token_ids);
  void ssd_forgotten(const kv::block_hash& h);
  bool on_ssd(const kv::block_hash& h) const { return on_ssd_.contains(h); }
  /// The blocks to save with the next step (see the header comment); the caller sends them.
  std::vector<save_item> take_saves();
  /// Page copies to make with the next step, before it computes (see the header comment).
  std::vector<block_copy> take_copies() { return std::exchange(copies_, {}); }
  /// Restore orders made since the last call; the caller sends them to the SSD store.
  std::vector<restore_order> take_restores() { return std::exchange(restores_, {}); }
  /// The first `n_ok` blocks of an order came back (the caller loads them into the layers with
  /// the next step); the rest will be computed. Returns the ids of the blocks to load, in order;
  /// empty when the order is stale (its sequence was cancelled or preempted meanwhile).
  std::vector<std::int32_t> restore_done(std::uint64_t order, std::int32_t n_ok);
  /// The sequence waiting for this restore order; null when the order is stale.
  const sequence* restoring(std::uint64_t order) const;

  const sequence* find(std::uint64_t id) const;
  std::size_t running() const { return running_.size(); }
  std::size_t waiting() const { return waiting_.size(); }
  const planner_counters& counters() const { return counters_; }
  const planner_options& options() const { return opts_; }

 private:
  /// Makes sure blocks cover positions [0, end); returns how many positions are covered.
  std::int32_t reserve_blocks(sequence& s, std::int32_t end);
  void release_blocks(sequence& s);
  /// Takes the longest cached chain of s's full prompt blocks (s holds no blocks yet).
  void match_prefix(sequence& s);
  /// Offers every block that s has filled to the pool under its hash.
  void publish_full_blocks(sequence& s);
  /// Keeps the block s was filling as a tail (see the header comment); called before s lets go of it.
  void publish_tail(sequence& s);
  /// The tokens of s after its first `full` blocks that a tail may hold for it: up to a block's
  /// worth, short of its last known token. Empty when there are none.
  std::span<const std::int32_t> tail_window(const sequence& s, std::int32_t full) const;
  /// Reuses the RAM tail after s's first `full` blocks that shares most of s's next tokens: a
  /// fresh block joins s's table, a copy of the tail's pages into it is queued, and s starts after
  /// the shared tokens. False on a miss (or when no block is free).
  bool take_tail(sequence& s, std::int32_t full);
  /// Lists a tail (token_ids not empty) as stored on the SSD, or on its way there.
  void list_ssd_tail(const kv::block_hash& h, const kv::block_hash& parent, std::vector<std::int32_t> token_ids);
  /// Makes sure s.hashes covers its first n full blocks.
  void extend_hashes(sequence& s, std::int32_t n);
  const kv::block_hash& root(kv::kv_format f);
  /// The hash block i of s is chained to: the root for the first block.
  const kv::block_hash& parent_of(sequence& s, std::size_t i);
  /// Continues s's chain through the SSD: allocates blocks for the hashes stored there and orders
  /// their restore. True if s now waits for one.
  bool start_restore(sequence& s);
  /// Queues a save of s's block i (write-through), unless the SSD has it or it is on its way.
  void offer_save(std::int32_t block, const kv::block_hash& h, const kv::block_hash& parent, kv::kv_format f,
                  std::vector<std::int32_t> token_ids = {});
  /// Preempts the most recently admitted running sequence other than `keep`; false if none.
  bool preempt_one(std::uint64_t keep, step_plan& plan);

  planner_options opts_;
  kv::block_pool& pool_;
  kv::prefix_hasher hasher_;
  std::unordered_map<std::uint8_t, kv::block_hash> roots_;
  std::unordered_map<std::uint64_t, sequence> seqs_;
  std::vector<std::uint64_t> running_;  // admission order
  std::deque<std::uint64_t> waiting_;
  planner_counters counters_;
  using hash_set = std::unordered_set<kv::block_hash, kv::block_hash_hasher>;
  hash_set on_ssd_;
  hash_set persisting_;  // asked to persist, no answer yet
  std::vector<save_item> saves_;
  std::vector<block_copy> copies_;
  std::vector<restore_order> restores_;
  std::unordered_map<std::uint64_t, std::uint64_t> orders_;  // restore order -> sequence
  std::uint64_t next_order_ = 1;

  /// A partial block: its hash (chained like a full block's, over fewer tokens) and its tokens.
  struct tail {
    kv::block_hash hash;
    std::vector<std::int32_t> tokens;
  };
  using tail_map = std::unordered_map<kv::block_hash, std::vector<tail>, kv::block_hash_hasher>;
  /// The tail under `parent` sharing the longest run with `next` (among those `live` accepts), and
  /// the run's length; {nullptr, 0} when none shares a token.
  template <class Live>
  static std::pair<const tail*, std::int32_t> best_tail(tail_map& tails, const kv::block_hash& parent,
                                                       std::span<const std::int32_t> next, Live live);
  /// Tails cached in the pool, by parent. An entry whose hash the pool has dropped (evicted) is
  /// stale; stale entries are dropped as lookups meet them, and all at once when they pile up.
  tail_map ram_tails_;
  std::size_t ram_tail_entries_ = 0;
  /// Tails on the SSD or being written there, by parent (only those in on_ssd_ are restored), and
  /// the parent of each (to forget one by its hash).
  tail_map ssd_tails_;
  std::unordered_map<kv::block_hash, kv::block_hash, kv::block_hash_hasher> ssd_tail_parent_;
};

}  // namespace strata::sched
