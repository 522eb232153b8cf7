#pragma once
// batch_planner: continuous batching policy in the vLLM v1 style. Plain class, no Asio: the
// scheduler actor owns one (and the kv_cache_manager it plans with) and asks it for each step's plan.
//
// Each step has one token budget. Running sequences that are decoding get their next token first;
// what is left goes to chunks of prompts (running ones still in prefill, then waiting ones in
// arrival order), so a long prompt never holds running streams back by more than one chunk; while
// some decode, prompts take at most prefill_while_decoding tokens, a shorter wait.
// When the KV pool runs out, the most recently admitted running sequence is preempted: its blocks
// are released and it goes back to the front of the queue to be recomputed later.
//
// What a sequence reuses, and where its blocks come from, is the cache's business
// (src/kv/kv_cache_manager.hpp): at admission the planner asks it what the sequence can reuse
// (its first chunk starts after that), or whether it must first wait for a restore from the SSD;
// then it asks for blocks as chunks need them, tells it what each step computed, and hands the
// blocks back when a sequence ends or is preempted.

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "src/kv/kv_cache_manager.hpp"

namespace strata::sched {

/// The scheduler's settings; those of the cache it plans with make cache_options_of().
struct planner_options {
  int token_budget = 512;
  /// Prompt tokens a step takes while other sequences decode in it (0: what the budget leaves).
  /// A step's time grows with its prompt chunk, and every decoding stream waits for the step:
  /// a smaller chunk beside decode rows keeps their inter-token gaps short, and prompts take the
  /// whole budget again once nothing decodes.
  int prefill_while_decoding = 0;
  int max_running = 16;
  int max_queued = 256;
  int block_tokens = 32;
  /// Longest sequence (prompt + generated) the model serves.
  int max_context = 4096;
  /// The cache's settings (kv::cache_options says what each one does).
  bool prefix_cache = false;
  kv::cache_namespace cache_ns;
  bool ssd = false;
  bool write_through = true;
  /// Save evicted blocks to the host tier and restore from it (kv::cache_options::host).
  bool host = false;
  /// Fetch what the local tiers lack from other replicas (kv::cache_options::remote).
  bool remote = false;
  /// Slots of per-sequence state the model's recurrent layers keep (0: none). A running sequence
  /// holds one from admission to its end or preemption; at most max_running run at once.
  int state_slots = 0;
  /// The model keeps state beyond its KV that cannot be sliced: with the prefix cache on, take
  /// frozen boundary snapshots every snapshot_every blocks and at each prompt's end (see
  /// src/kv/snapshot_index.hpp); chunks end at those boundaries.
  bool snapshots = false;
  int snapshot_every = 0;
  /// When above 1: a prompt chunk ends at a position that is a multiple of it, or at the
  /// sequence's last token (shorter only where a multiple cannot be reached). The chunked delta
  /// rule of recurrent layers cuts its chunks at such multiples (kernels::delta_rule_chunk_for),
  /// so a prompt gets the same bits whatever steps the budget cuts it into and wherever a
  /// snapshot resumes it.
  int chunk_align = 0;
};

/// The settings of the cache a planner with these options plans with.
kv::cache_options cache_options_of(const planner_options& o);

/// One request's sequence as the planner sees it (its blocks are the cache's: kv_cache_manager::blocks).
struct sequence {
  std::uint64_t id = 0;
  /// Prompt followed by the tokens generated so far.
  std::vector<std::int32_t> tokens;
  std::int32_t n_prompt = 0;
  std::int32_t max_new_tokens = 16;
  /// Tokens whose KV is in the cache; the next step computes from here.
  std::int32_t n_computed = 0;
  /// A slow client asked to pause: no decode steps until it resumes.
  bool paused = false;
  int preemptions = 0;
  /// The tenant's cache salt: sequences with different salts share no block.
  kv::cache_salt salt;
  /// The KV format of the sequence's blocks; part of every block hash.
  kv::kv_format format = kv::kv_format::f16;
  /// Prompt tokens whose KV came from the cache when the request was first admitted.
  std::int32_t cached_tokens = 0;
  /// Of those, the tokens restored from the SSD tier, and from the host tier.
  std::int32_t ssd_cached_tokens = 0;
  std::int32_t host_cached_tokens = 0;
  bool admitted = false;
  /// Another choice of the same prompt (n > 1), or 0: with the prefix cache on, this sequence is
  /// admitted only once that one has computed the prompt, whose KV it then reuses.
  std::uint64_t after = 0;
  /// Its slot of recurrent state while it runs (planner_options::state_slots), else -1.
  std::int32_t state_slot = -1;
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
  /// Of those, the tokens restored from the SSD, and those fetched from other replicas.
  std::uint64_t ssd_hit_tokens = 0;
  std::uint64_t remote_hit_tokens = 0;
  /// And those restored from the host tier.
  std::uint64_t host_hit_tokens = 0;
};

class batch_planner {
 public:
  batch_planner(planner_options opts, kv::kv_cache_manager& cache);

  admit_result submit(sequence s);
  /// Removes a sequence wherever it is and releases its blocks. False if unknown.
  bool cancel(std::uint64_t id);
  /// Ends a finished sequence (same as cancel, counted separately by the caller).
  bool finish(std::uint64_t id) { return cancel(id); }
  void set_paused(std::uint64_t id, bool paused);

  /// The next step. Has the cache allocate the blocks its items need; may preempt.
  step_plan plan();
  /// Records that the plan ran: advances n_computed; `sampled[i]` is the token drawn for the i-th
  /// item with sample=true (in plan order), appended to that sequence.
  void commit(const step_plan& plan, const std::vector<std::int32_t>& sampled);
  /// The first `n_ok` blocks of a restore order came back (see kv_cache_manager::restore_done):
  /// the waiting sequence computes from the end of them. Returns the ids of the blocks to load
  /// with the next step, in order; empty when the order is stale.
  std::vector<std::int32_t> restore_done(std::uint64_t order, std::int32_t n_ok,
                                         std::optional<kv::state_snapshot> snap = std::nullopt);

  /// cache.mode changed at run time (see kv_cache_manager::set_mode).
  void set_cache_mode(bool prefix_cache, bool ssd);

  const sequence* find(std::uint64_t id) const;
  std::size_t running() const { return running_.size(); }
  std::size_t waiting() const { return waiting_.size(); }
  const planner_counters& counters() const { return counters_; }
  const planner_options& options() const { return opts_; }

 private:
  /// Hands s's blocks back to the cache (which keeps the one it was filling as a tail).
  void release(sequence& s);
  /// Preempts the most recently admitted running sequence other than `keep`; false if none.
  bool preempt_one(std::uint64_t keep, step_plan& plan);
  /// Admits the first waiting sequence if the blocks of its first chunk can be had; false if not.
  bool admit_next(step_plan& plan, std::int32_t& budget);
  /// Schedules the next chunk of s's known tokens within the budget; false if none fits.
  bool schedule_chunk(sequence& s, step_plan& plan, std::int32_t& budget);
  /// Where a chunk of positions [from, end) of a sequence of `total` tokens ends under
  /// opts_.chunk_align: end itself, or the last multiple of the alignment before it (from: none
  /// fits this step).
  std::int32_t aligned_end(std::int32_t from, std::int32_t end, std::int32_t total) const;

  planner_options opts_;
  kv::kv_cache_manager& cache_;
  std::unordered_map<std::uint64_t, sequence> seqs_;
  std::vector<std::uint64_t> running_;  // admission order
  std::deque<std::uint64_t> waiting_;
  std::vector<std::int32_t> free_slots_;  // of recurrent state, unused by any running sequence
  planner_counters counters_;
};

}  // namespace strata::sched
