#include "src/kv/kv_cache_manager.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "src/kv/kv_test_tokens.hpp"

#include "tests/support/test_seed.hpp"

namespace strata::kv {
namespace {

using test_tokens::iota_tokens;
using test_tokens::tokens_t;

cache_options caching(std::int32_t block_tokens) {
  cache_options o;
  o.block_tokens = block_tokens;
  o.prefix_cache = true;
  o.ns.model = {42, 43};
  return o;
}

cache_options tiered(std::int32_t block_tokens, bool write_through = true) {
  cache_options o = caching(block_tokens);
  o.ssd = true;
  o.write_through = write_through;
  return o;
}

tokens_t concat(tokens_t a, const tokens_t& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// A sequence run through the cache as the planner runs one: it takes what the cache holds of its
/// tokens, computes up to n_computed (every block published), and lets go. Returns what it took.
std::int32_t run(kv_cache_manager& m, std::uint64_t id, const tokens_t& tokens, std::int32_t n_computed,
                 kv_format f = kv_format::f16) {
  const std::int32_t found = m.match(id, f, tokens);
  EXPECT_EQ(m.cover(id, n_computed), n_computed) << "sequence " << id;
  m.publish(id, tokens, n_computed);
  m.release(id, tokens, n_computed);
  return found;
}

/// What a new sequence of these tokens would take (it lets go at once, keeping nothing new).
std::int32_t probe(kv_cache_manager& m, const tokens_t& tokens, kv_format f = kv_format::f16) {
  const std::int32_t found = m.match(999, f, tokens);
  m.release(999, tokens, found - found % m.options().block_tokens);
  m.take_copies();
  return found;
}

/// The saves a run of one sequence hands out.
std::vector<save_item> saves_of(kv_cache_manager& m, std::uint64_t id, const tokens_t& tokens, std::int32_t n_computed) {
  run(m, id, tokens, n_computed);
  return m.take_saves();
}

// --- prefix match ---------------------------------------------------------------------------

TEST(kv_cache_manager, a_repeated_prompt_takes_its_longest_cached_chain_and_what_it_shares_of_the_next_block) {
  kv_cache_manager m(caching(4), 64);
  // Prompt 1..10, then 7 7 7 generated; positions 0..11 computed: [1..4] [5..8] [9 10 7 7].
  EXPECT_EQ(run(m, 1, concat(iota_tokens(10), {7, 7, 7}), 12), 0);
  EXPECT_EQ(m.pool().cached_count(), 3);
  EXPECT_EQ(m.pool().in_use(), 0);
  // The chain of two blocks, then token 9 from a copy of [9 10 7 7] (10, the last, is computed).
  EXPECT_EQ(m.match(2, kv_format::f16, iota_tokens(10)), 9);
  const auto blocks = m.blocks(2);
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(m.pool().refcount(blocks[0]), 1);
  EXPECT_EQ(m.pool().in_use(), 3);
  EXPECT_EQ(m.pool().cached_count(), 1) << "the block copied from stays cached";
  const auto copies = m.take_copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].to, blocks[2]);
}

TEST(kv_cache_manager, a_prompt_that_parts_inside_a_full_block_reuses_the_tokens_before_it) {
  kv_cache_manager m(caching(4), 64);
  run(m, 1, concat(iota_tokens(20), {7}), 20);
  tokens_t other = iota_tokens(20);
  other[10] = 99;  // inside block 2: blocks 0 and 1 match, then 9 and 10 of block 2
  EXPECT_EQ(probe(m, other), 10);
  other[8] = 98;  // at block 2's first token: only the blocks before it
  EXPECT_EQ(probe(m, other), 8);
}

TEST(kv_cache_manager, the_next_turn_reuses_the_tokens_it_shares_with_an_answer_that_filled_a_block) {
  kv_cache_manager m(caching(4), 64);
  // The first turn's prompt (1..6) ends inside block 1, which its answer (20 21 22 23 24) fills
  // and goes on past: [1..4] [5 6 20 21] [22 23] with 24 sampled last.
  const tokens_t first = iota_tokens(6);
  run(m, 1, concat(first, {20, 21, 22, 23, 24}), 10);
  // The next turn holds the answer as the template renders it: its first token, then another.
  EXPECT_EQ(probe(m, concat(first, {20, 30, 40, 41})), 7);
  // Or parts right where the answer starts: the prompt's own tokens are reused still.
  EXPECT_EQ(probe(m, concat(first, {30, 40, 41})), 6);
  // The answer as generated: everything the first turn computed.
  EXPECT_EQ(probe(m, concat(first, {20, 21, 22, 23, 24, 40})), 10);
}

TEST(kv_cache_manager, the_last_known_token_is_always_computed) {
  kv_cache_manager m(caching(4), 64);
  const tokens_t all = concat(iota_tokens(10), {7, 7});
  run(m, 1, concat(all, {7}), 12);
  // Every block of these 12 tokens is cached, but the logits of the last one are needed.
  EXPECT_EQ(probe(m, all), 11);
  EXPECT_EQ(probe(m, concat(all, {3})), 12);
}

TEST(kv_cache_manager, nothing_is_reused_with_the_cache_off_or_across_formats) {
  cache_options off;
  off.block_tokens = 4;
  kv_cache_manager o(off, 64);
  run(o, 1, concat(iota_tokens(10), {7, 7, 7}), 12);
  EXPECT_EQ(o.pool().cached_count(), 0);
  EXPECT_EQ(probe(o, iota_tokens(10)), 0);
  EXPECT_TRUE(o.take_saves().empty());

  pool_config pc;
  pc.space.capacity = {64, 64, 64};
  pc.budget = pc.cached_budget = 64;
  kv_cache_manager m(caching(4), pc);
  run(m, 1, concat(iota_tokens(10), {7, 7, 7}), 12);
  EXPECT_EQ(m.match(2, kv_format::q8_0, iota_tokens(10)), 0);
  EXPECT_EQ(m.cover(2, 10), 10);
  for (auto b : m.blocks(2)) EXPECT_EQ(m.pool().format_of(b), kv_format::q8_0);
}

// --- tails ----------------------------------------------------------------------------------

TEST(kv_cache_manager, a_prompt_goes_on_from_the_tokens_it_shares_with_a_finished_sequences_last_block) {
  kv_cache_manager m(caching(4), 64);
  // Prompt 1..10, then 7 7; positions 0..10 computed: [1..4] [5..8] cached, [9 10 7] as the tail.
  const tokens_t first = concat(iota_tokens(10), {7, 7});
  m.match(1, kv_format::f16, first);
  m.cover(1, 11);
  m.publish(1, first, 11);
  const std::int32_t tail_block = m.blocks(1)[2];
  m.release(1, first, 11);
  EXPECT_EQ(m.pool().cached_count(), 3);

  // Shares 9, 10, 7 with the tail, then goes on: it starts at position 11, in a copy of the
  // tail's block. The same prompt at the same time gets a copy too: the tail stays cached.
  const tokens_t next{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6};
  EXPECT_EQ(m.match(2, kv_format::f16, next), 11);
  EXPECT_EQ(m.match(3, kv_format::f16, next), 11);
  const auto copies = m.take_copies();
  ASSERT_EQ(copies.size(), 2u);
  for (std::uint64_t id : {2u, 3u}) {
    const auto blocks = m.blocks(id);
    ASSERT_EQ(blocks.size(), 3u);
    EXPECT_NE(blocks[2], tail_block);
    EXPECT_EQ(m.pool().refcount(blocks[2]), 1);
    EXPECT_EQ(copies[id - 2].from, tail_block);
    EXPECT_EQ(copies[id - 2].to, blocks[2]);
  }
  // Both compute their two prompt tokens and one generated 7, and end with one more 7 sampled.
  for (std::uint64_t id : {2u, 3u}) {
    const tokens_t done = concat(next, {7, 7});
    m.cover(id, 14);
    m.publish(id, done, 14);
    m.release(id, done, 14);
  }
  // 2 filled [9 10 7 5] and left [6 7] as its tail (3's identical tail is not kept twice): a
  // prompt diverging inside the last block reuses the tokens before the divergence.
  EXPECT_EQ(probe(m, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6, 8, 8}), 13);
  // The last known token is computed even when a tail holds it.
  EXPECT_EQ(probe(m, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6, 7}), 13);
  EXPECT_EQ(m.pool().in_use(), 0);
}

TEST(kv_cache_manager, takes_the_tail_sharing_the_longest_run_with_the_next_tokens) {
  kv_cache_manager m(caching(8), 64);
  const tokens_t chain = iota_tokens(8);
  // Three tails after the same chain, left by sequences that diverged after it.
  run(m, 1, concat(chain, {9, 10, 11, 0}), 11);
  run(m, 2, concat(chain, {9, 10, 12, 13, 14, 0}), 13);
  run(m, 3, concat(chain, {9, 15, 0}), 10);
  EXPECT_EQ(probe(m, concat(chain, {9, 10, 12, 13, 99, 100})), 12);
  EXPECT_EQ(probe(m, concat(chain, {9, 10, 11, 13, 99})), 11);
  EXPECT_EQ(probe(m, concat(chain, {9, 15, 16})), 10);
  EXPECT_EQ(probe(m, concat(chain, {9, 16})), 9);
  EXPECT_EQ(probe(m, concat(chain, {20, 21})), 8);
  // Under another chain, none of them is a candidate.
  EXPECT_EQ(probe(m, concat(iota_tokens(8, 2), {9, 10, 12, 13, 99})), 0);
}

TEST(kv_cache_manager, an_evicted_tail_is_a_miss) {
  kv_cache_manager m(caching(4), 6);
  run(m, 1, concat(iota_tokens(10), {7, 7}), 11);
  // Another sequence takes every block: the cached ones are evicted, the tail with them.
  run(m, 2, iota_tokens(23, 100), 22);
  EXPECT_EQ(probe(m, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5}), 0);
  EXPECT_TRUE(m.take_copies().empty());
  EXPECT_EQ(m.pool().in_use(), 0);
}

TEST(kv_cache_manager, a_block_evicted_and_cached_again_is_reused_in_part_again) {
  kv_cache_manager m(caching(4), 3);
  const tokens_t a = iota_tokens(9);  // [1..4] [5..8], 9 sampled
  const tokens_t parts = concat(iota_tokens(6), {50, 51});
  run(m, 1, a, 8);
  EXPECT_EQ(probe(m, parts), 6);
  // Other sequences evict a's blocks, over and over: more listings than are kept before the
  // stale ones are dropped.
  for (int i = 0; i < 50; ++i) {
    run(m, 10 + static_cast<std::uint64_t>(i), iota_tokens(13, 100 + 20 * i), 12);
    m.take_saves();
  }
  EXPECT_EQ(probe(m, parts), 0);
  run(m, 2, a, 8);
  EXPECT_EQ(probe(m, parts), 6);
}

// --- references and eviction ----------------------------------------------------------------

TEST(kv_cache_manager, sequences_share_a_cached_chain_and_give_it_back_to_the_lru) {
  kv_cache_manager m(caching(4), 16);
  const tokens_t p = iota_tokens(13);
  run(m, 1, p, 12);
  EXPECT_EQ(m.match(2, kv_format::f16, p), 12);
  EXPECT_EQ(m.match(3, kv_format::f16, p), 12);
  const auto a = m.blocks(2), b = m.blocks(3);
  ASSERT_EQ(a.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i], b[i]);
    EXPECT_EQ(m.pool().refcount(a[i]), 2);
  }
  EXPECT_EQ(m.pool().cached_count(), 0) << "blocks in use are not in the LRU";
  // Held blocks are never evicted: another sequence gets only what is free.
  EXPECT_EQ(m.match(4, kv_format::f16, iota_tokens(64, 100)), 0);
  EXPECT_EQ(m.cover(4, 64), 13 * 4);
  m.release(4, iota_tokens(64, 100), 0);
  m.release(2, p, 12);
  EXPECT_EQ(m.pool().refcount(m.blocks(3)[0]), 1);
  m.release(3, p, 12);
  EXPECT_EQ(m.pool().in_use(), 0);
  EXPECT_EQ(m.pool().cached_count(), 3);
  EXPECT_EQ(probe(m, p), 12);
}

TEST(kv_cache_manager, evicts_the_least_recently_released_blocks_first) {
  kv_cache_manager m(caching(4), 8);
  const tokens_t a = iota_tokens(9, 1), b = iota_tokens(9, 100), c = iota_tokens(9, 200);
  run(m, 1, a, 8);
  run(m, 2, b, 8);
  EXPECT_EQ(m.pool().cached_count(), 4);
  // a is used again: it becomes the most recently released.
  EXPECT_EQ(run(m, 3, a, 8), 8);
  // Two fresh blocks for c evict b's blocks, the least recently released, before a's.
  EXPECT_EQ(m.match(4, kv_format::f16, c), 0);
  EXPECT_EQ(m.cover(4, 24), 24);
  m.release(4, c, 0);
  EXPECT_EQ(probe(m, a), 8);
  EXPECT_EQ(probe(m, b), 0);
  EXPECT_EQ(m.pool().evictions(), 2u);
}

TEST(kv_cache_manager, reclaim_offers_the_oldest_cached_blocks_and_evicts_only_those_still_cached) {
  // 8 one-byte blocks (a pool of n f16 blocks counts each as one unit of its budget).
  kv_cache_manager m(caching(4), 8);
  const tokens_t a = iota_tokens(9, 1), b = iota_tokens(9, 100);
  run(m, 1, a, 8);
  run(m, 2, b, 8);
  ASSERT_EQ(m.pool().cached_count(), 4);
  const std::int64_t unit = m.pool().block_bytes(kv_format::f16);
  EXPECT_TRUE(m.reclaim_candidates(m.pool().free_bytes()).empty()) << "nothing to do at the mark";
  // Two more free blocks wanted: a's two blocks first (released first), each already "persisted"
  // (no SSD tier: evicting spills nothing).
  auto c = m.reclaim_candidates(m.pool().free_bytes() + 2 * unit);
  ASSERT_GE(c.size(), 2u);
  for (const auto& x : c) EXPECT_TRUE(x.persisted);
  // a is used again meanwhile: its blocks are no longer cached, and reclaim leaves them alone.
  ASSERT_EQ(m.match(3, kv_format::f16, a), 8);
  std::vector<std::int32_t> victims;
  for (const auto& x : c) victims.push_back(x.block);
  const std::int64_t freed = m.reclaim(victims);
  EXPECT_EQ(freed, static_cast<std::int64_t>(c.size() - 2) * unit);
  m.release(3, a, 8);
  EXPECT_EQ(probe(m, a), 8) << "the blocks in use were not evicted";
}

TEST(kv_cache_manager, reclaim_marks_blocks_not_yet_on_the_ssd_and_saves_them_with_the_next_step) {
  kv_cache_manager m(tiered(16, false), 6);
  EXPECT_TRUE(saves_of(m, 1, iota_tokens(65), 64).empty());
  const std::int64_t unit = m.pool().block_bytes(kv_format::f16);
  auto c = m.reclaim_candidates(m.pool().free_bytes() + 4 * unit);
  ASSERT_EQ(c.size(), 4u);
  for (const auto& x : c) EXPECT_FALSE(x.persisted) << "write-back: not on the SSD yet";
  std::vector<std::int32_t> victims;
  for (const auto& x : c) victims.push_back(x.block);
  EXPECT_EQ(m.reclaim(victims), 4 * unit);
  EXPECT_EQ(m.pool().cached_count(), 0);
  // Their KV leaves for the SSD with the next step, before anything can overwrite it.
  EXPECT_EQ(m.take_saves().size(), 4u);
}

TEST(kv_cache_manager, a_sequence_that_does_not_start_gives_back_what_it_matched) {
  kv_cache_manager m(caching(4), 8);
  const tokens_t p = concat(iota_tokens(10), {7, 7});
  run(m, 1, p, 11);
  EXPECT_EQ(m.match(2, kv_format::f16, p), 11);
  EXPECT_TRUE(m.can_cover(2, 12));
  EXPECT_FALSE(m.can_cover(2, 4 * 10));
  m.release(2, p, 11);
  EXPECT_EQ(m.pool().in_use(), 0);
  EXPECT_TRUE(m.blocks(2).empty());
  EXPECT_EQ(probe(m, p), 11);
}

// --- the SSD tier ---------------------------------------------------------------------------

TEST(kv_cache_manager, write_through_offers_each_filled_block_once_with_its_parent_chain) {
  kv_cache_manager m(tiered(16), 100);
  // 50 prompt tokens + 20 generated 7s = 70 known, 69 computed: 4 full blocks, then the tail of
  // 5 tokens left when the sequence ended.
  const tokens_t seq = concat(iota_tokens(50), tokens_t(20, 7));
  const auto saves = saves_of(m, 1, seq, 69);
  ASSERT_EQ(saves.size(), 5u);
  for (std::size_t i = 1; i < saves.size(); ++i) EXPECT_EQ(saves[i].parent, saves[i - 1].hash) << i;
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(saves[i].token_ids.empty()) << i;
  EXPECT_EQ(saves[4].token_ids, tokens_t(5, 7));
  // The same sequence again: every block is already on its way, nothing is offered twice.
  EXPECT_TRUE(saves_of(m, 2, seq, 69).empty());
}

TEST(kv_cache_manager, the_ssd_set_follows_written_not_written_and_removed) {
  kv_cache_manager m(tiered(16), 100);
  const tokens_t seq = iota_tokens(40);
  const auto saves = saves_of(m, 1, seq, 39);  // 2 full blocks and a tail of 7
  ASSERT_EQ(saves.size(), 3u);
  for (const auto& s : saves) EXPECT_FALSE(m.on_ssd(s.hash)) << "asked to persist is not on the SSD yet";
  m.ssd_stored(saves[0].hash);  // written
  m.ssd_stored(saves[2].hash);
  m.ssd_forgotten(saves[1].hash);  // not written
  EXPECT_TRUE(m.on_ssd(saves[0].hash));
  EXPECT_FALSE(m.on_ssd(saves[1].hash));
  EXPECT_TRUE(m.on_ssd(saves[2].hash));
  // Evicted from RAM and asked for again, the block that was not written is offered again; the
  // written ones are not.
  kv_cache_manager fresh(tiered(16), 100);
  for (const auto& s : saves) fresh.ssd_stored(s.hash, s.parent, s.token_ids);
  fresh.ssd_forgotten(saves[1].hash);
  auto again = saves_of(fresh, 2, seq, 39);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].hash, saves[1].hash);
  // Removed (segment evicted): a restore no longer asks for it.
  m.ssd_forgotten(saves[0].hash);  // removed
  EXPECT_FALSE(m.on_ssd(saves[0].hash));
}

TEST(kv_cache_manager, eviction_mode_saves_a_block_before_the_step_that_reuses_it) {
  // 6 blocks in all, so a second sequence evicts the first one's cached blocks.
  kv_cache_manager m(tiered(16, false), 6);
  EXPECT_TRUE(saves_of(m, 1, iota_tokens(65), 64).empty()) << "nothing is saved before it leaves RAM";
  EXPECT_EQ(m.pool().cached_count(), 4);
  const tokens_t other = iota_tokens(80, 1000);
  ASSERT_EQ(m.match(2, kv_format::f16, other), 0);
  EXPECT_EQ(m.cover(2, 80), 80);
  const auto saves = m.take_saves();
  ASSERT_FALSE(saves.empty());
  // Every saved block is one just allocated to sequence 2: it still holds sequence 1's KV.
  const auto blocks = m.blocks(2);
  for (const auto& sv : saves) {
    EXPECT_NE(std::find(blocks.begin(), blocks.end(), sv.block), blocks.end());
    EXPECT_TRUE(sv.token_ids.empty());
    EXPECT_FALSE(m.on_ssd(sv.hash));
  }
}

TEST(kv_cache_manager, a_chain_that_goes_on_on_the_ssd_is_ordered_and_partly_restored) {
  const tokens_t p = iota_tokens(70);
  std::vector<block_hash> hashes;
  {
    kv_cache_manager first(tiered(16), 100);
    for (const auto& sv : saves_of(first, 1, concat(p, {7}), 70)) {
      if (sv.token_ids.empty()) hashes.push_back(sv.hash);
    }
  }
  ASSERT_EQ(hashes.size(), 4u);
  kv_cache_manager m(tiered(16), 100);
  for (const auto& h : hashes) m.ssd_stored(h);
  ASSERT_EQ(m.match(7, kv_format::f16, p), 0);
  EXPECT_TRUE(m.restore(7, p, 0));
  EXPECT_TRUE(m.restoring(7));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_EQ(orders[0].seq, 7u);
  EXPECT_EQ(orders[0].hashes, hashes);  // 4 full blocks (the last token is always computed)
  EXPECT_EQ(m.restore_format(orders[0].order), kv_format::f16);
  // Only two blocks come back: the rest is computed, and its blocks go back.
  const auto r = m.restore_done(orders[0].order, 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->seq, 7u);
  EXPECT_EQ(r->loaded.size(), 2u);
  EXPECT_EQ(r->n_computed, 32);
  EXPECT_EQ(r->restored, 32);
  EXPECT_FALSE(m.restoring(7));
  EXPECT_EQ(m.blocks(7).size(), 2u);
  EXPECT_EQ(m.pool().in_use(), 2);
  // A stale answer (the order already answered) loads nothing.
  EXPECT_FALSE(m.restore_done(orders[0].order, 4));
  EXPECT_FALSE(m.restore_format(orders[0].order));
  // The restored blocks are published: another sequence shares them from RAM.
  EXPECT_EQ(m.match(8, kv_format::f16, p), 32);
}

TEST(kv_cache_manager, a_tail_on_the_ssd_comes_back_after_the_chain_with_the_tokens_it_shares) {
  // 70 prompt tokens and one sampled: 4 full blocks and a tail holding tokens 65..70.
  std::vector<save_item> saves;
  {
    kv_cache_manager first(tiered(16), 100);
    saves = saves_of(first, 1, concat(iota_tokens(70), {7}), 70);
  }
  ASSERT_EQ(saves.size(), 5u);
  ASSERT_EQ(saves[4].token_ids, (tokens_t{65, 66, 67, 68, 69, 70}));
  kv_cache_manager m(tiered(16), 100);
  for (const auto& sv : saves) m.ssd_stored(sv.hash, sv.parent, sv.token_ids);
  // Shares the first 68 tokens: the 4 blocks, then 4 tokens of the tail.
  const tokens_t p = concat(iota_tokens(68), {500, 501, 502});
  ASSERT_EQ(m.match(7, kv_format::f16, p), 0);
  ASSERT_TRUE(m.restore(7, p, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_EQ(orders[0].hashes.size(), 5u);
  EXPECT_EQ(orders[0].hashes[4], saves[4].hash);
  auto r = m.restore_done(orders[0].order, 5);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->loaded.size(), 5u);
  EXPECT_EQ(r->n_computed, 68);
  EXPECT_EQ(r->restored, 68);

  // The same prompt again: the full blocks are in RAM now (7 holds them), the tail is read from
  // the SSD again (7 writes on into its copy). Should that read fail, the tail is computed.
  ASSERT_EQ(m.match(8, kv_format::f16, p), 64);
  ASSERT_TRUE(m.restore(8, p, 64));
  orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_EQ(orders[0].hashes, std::vector<block_hash>{saves[4].hash});
  r = m.restore_done(orders[0].order, 0);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->loaded.empty());
  EXPECT_EQ(r->n_computed, 64);
  EXPECT_EQ(m.blocks(8).size(), 4u);

  // Once the SSD drops it, the tail is not ordered any more.
  m.ssd_forgotten(saves[4].hash);
  ASSERT_EQ(m.match(9, kv_format::f16, p), 64);
  EXPECT_FALSE(m.restore(9, p, 64));
  EXPECT_TRUE(m.take_restores().empty());
}

TEST(kv_cache_manager, a_released_restore_answers_nothing_and_frees_its_blocks) {
  const tokens_t p = iota_tokens(40);
  std::vector<save_item> saves;
  {
    kv_cache_manager first(tiered(16), 100);
    saves = saves_of(first, 1, concat(p, {7}), 40);
  }
  kv_cache_manager m(tiered(16), 20);
  for (const auto& sv : saves) m.ssd_stored(sv.hash, sv.parent, sv.token_ids);
  ASSERT_EQ(m.match(3, kv_format::f16, p), 0);
  ASSERT_TRUE(m.restore(3, p, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_GT(m.pool().in_use(), 0);
  m.release(3, p, 0);
  EXPECT_EQ(m.pool().in_use(), 0);
  EXPECT_FALSE(m.restore_format(orders[0].order));
  EXPECT_FALSE(m.restore_done(orders[0].order, 2));
  EXPECT_EQ(m.pool().in_use(), 0);
  // Matched again meanwhile, the sequence does not take an old order's answer either.
  ASSERT_EQ(m.match(3, kv_format::f16, p), 0);
  ASSERT_TRUE(m.restore(3, p, 0));
  const auto fresh = m.take_restores();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_FALSE(m.restore_done(orders[0].order, 2));
  EXPECT_TRUE(m.restoring(3));
  EXPECT_TRUE(m.restore_done(fresh[0].order, 2));
}

// --- random sequences -----------------------------------------------------------------------

/// The longest run that `a` shares with `b` from their first token.
std::int32_t shared_run(const tokens_t& a, const tokens_t& b) {
  const auto m = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::int32_t>(m.first - a.begin());
}

TEST(kv_cache_manager, random_sequences_reuse_what_earlier_ones_computed_and_leak_no_block) {
  const unsigned seed = test_seed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  constexpr std::int32_t bt = 4;
  // Large enough that nothing is evicted: what an earlier sequence computed stays cached.
  kv_cache_manager m(caching(bt), 1 << 14);
  std::vector<tokens_t> computed;  // what each finished sequence computed
  for (std::uint64_t id = 1; id <= 300; ++id) {
    // A new sequence: a copy of part of an earlier one (or nothing), then fresh tokens from a
    // small alphabet, so that runs often share a few tokens past their common prefix.
    tokens_t t;
    if (!computed.empty() && rng() % 4 != 0) {
      const tokens_t& base = computed[rng() % computed.size()];
      t.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(rng() % (std::min<std::size_t>(base.size(), 120) + 1)));
    }
    for (int n = 1 + static_cast<int>(rng() % 20); n > 0; --n) t.push_back(static_cast<std::int32_t>(rng() % 3));
    std::int32_t best = 0;
    for (const auto& c : computed) best = std::max(best, shared_run(t, c));
    const auto known = static_cast<std::int32_t>(t.size());
    const std::int32_t whole = std::min(best, known - 1) / bt * bt;
    const std::int32_t found = m.match(id, kv_format::f16, t);
    // Every token shared but the last one.
    ASSERT_EQ(found, std::min(best, known - 1)) << "sequence " << id << " (whole blocks: " << whole << ")";
    m.take_copies();
    ASSERT_EQ(m.cover(id, known), known);
    for (const std::int32_t b : m.blocks(id)) ASSERT_GE(m.pool().refcount(b), 1);
    // It computes all its tokens but the last (which it samples from), in one or two steps.
    const std::int32_t end = known - 1;
    if (end > found && rng() % 2) m.publish(id, t, found + static_cast<std::int32_t>(rng() % static_cast<unsigned>(end - found + 1)));
    m.publish(id, t, end);
    m.release(id, t, end);
    ASSERT_EQ(m.pool().in_use(), 0) << "sequence " << id;
    ASSERT_EQ(m.pool().evictions(), 0u);
    computed.emplace_back(t.begin(), t.begin() + end);
  }
}

}  // namespace
}  // namespace strata::kv
