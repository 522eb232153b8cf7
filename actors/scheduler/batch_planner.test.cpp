#include "actors/scheduler/batch_planner.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace strata::sched {
namespace {

sequence make_seq(std::uint64_t id, int prompt, int max_new) {
  sequence s;
  s.id = id;
  s.tokens.resize(static_cast<std::size_t>(prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), 1);
  s.max_new_tokens = max_new;
  return s;
}

sequence seq_of(std::uint64_t id, std::vector<std::int32_t> tokens, int max_new) {
  sequence s;
  s.id = id;
  s.tokens = std::move(tokens);
  s.max_new_tokens = max_new;
  return s;
}

planner_options caching(planner_options o) {
  o.prefix_cache = true;
  o.cache_ns.model = {42, 43};
  return o;
}

/// Runs plan/commit like the scheduler would, finishing sequences after max_new_tokens.
struct driver {
  kv::block_pool pool;
  batch_planner planner;
  std::map<std::uint64_t, int> generated;
  std::set<std::uint64_t> finished;
  driver(planner_options o, int blocks) : pool(blocks), planner(o, pool) {}
  driver(planner_options o, const kv::pool_config& pc) : pool(pc), planner(o, pool) {}

  step_plan step() {
    auto plan = planner.plan();
    // A step writes only blocks its sequence owns alone: a shared (cached) block is never
    // written again.
    for (auto& item : plan.items) {
      const sequence* s = planner.find(item.seq);
      const int bt = planner.options().block_tokens;
      for (int b = item.start / bt; b <= (item.start + item.n_tokens - 1) / bt; ++b) {
        EXPECT_EQ(pool.refcount(s->blocks.at(static_cast<std::size_t>(b))), 1) << "sequence " << item.seq << " block " << b;
      }
    }
    std::vector<std::int32_t> sampled;
    for (auto& item : plan.items)
      if (item.sample) sampled.push_back(7);
    planner.commit(plan, sampled);
    for (auto& item : plan.items) {
      if (!item.sample) continue;
      const sequence* s = planner.find(item.seq);
      if (s && static_cast<int>(s->tokens.size()) - s->n_prompt >= s->max_new_tokens) {
        planner.finish(item.seq);
        finished.insert(item.seq);
      }
    }
    return plan;
  }
};

/// The plan holds one item, computing n tokens from `start`.
void expect_one_item(const step_plan& plan, std::int32_t start, std::int32_t n) {
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].start, start);
  EXPECT_EQ(plan.items[0].n_tokens, n);
}

planner_options tiered(planner_options o, bool write_through = true) {
  o = caching(o);
  o.ssd = true;
  o.write_through = write_through;
  return o;
}

TEST(batch_planner, write_through_offers_each_filled_block_once_with_its_parent_chain) {
  driver d(tiered({.token_budget = 64, .max_running = 4, .block_tokens = 16}), 100);
  ASSERT_EQ(d.planner.submit(make_seq(1, 50, 20)), admit_result::queued);
  std::vector<save_item> saves;
  while (!d.finished.contains(1)) {
    d.step();
    auto s = d.planner.take_saves();
    saves.insert(saves.end(), s.begin(), s.end());
  }
  // 50 prompt tokens + 20 generated = 70 known, 69 computed: 4 full blocks, then the tail of 5
  // tokens left when the sequence ended.
  ASSERT_EQ(saves.size(), 5u);
  for (std::size_t i = 1; i < saves.size(); ++i) EXPECT_EQ(saves[i].parent, saves[i - 1].hash) << i;
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(saves[i].token_ids.empty()) << i;
  EXPECT_EQ(saves[4].token_ids, (std::vector<std::int32_t>{7, 7, 7, 7, 7}));
  // The same prompt again: every block is already on its way, nothing is offered twice.
  ASSERT_EQ(d.planner.submit(make_seq(2, 50, 20)), admit_result::queued);
  while (!d.finished.contains(2)) {
    d.step();
    EXPECT_TRUE(d.planner.take_saves().empty());
  }
}

TEST(batch_planner, eviction_mode_saves_a_block_before_the_step_that_reuses_it) {
  // 6 blocks in all, so a second prompt evicts the first one's cached blocks.
  driver d(tiered({.token_budget = 64, .max_running = 1, .block_tokens = 16}, false), 6);
  ASSERT_EQ(d.planner.submit(make_seq(1, 64, 1)), admit_result::queued);
  while (!d.finished.contains(1)) {
    d.step();
    EXPECT_TRUE(d.planner.take_saves().empty()) << "nothing is saved before it leaves RAM";
  }
  EXPECT_EQ(d.pool.cached_count(), 4);
  std::vector<std::int32_t> other(80);
  std::iota(other.begin(), other.end(), 1000);
  ASSERT_EQ(d.planner.submit(seq_of(2, other, 1)), admit_result::queued);
  auto plan = d.planner.plan();
  auto saves = d.planner.take_saves();
  ASSERT_FALSE(saves.empty());
  // Every saved block is one the step just allocated to sequence 2: it still holds sequence 1's KV.
  const sequence* s2 = d.planner.find(2);
  for (const auto& sv : saves) {
    EXPECT_NE(std::find(s2->blocks.begin(), s2->blocks.end(), sv.block), s2->blocks.end());
    EXPECT_FALSE(d.planner.on_ssd(sv.hash));
  }
}

TEST(batch_planner, a_prompt_whose_chain_continues_on_the_ssd_waits_for_its_restore) {
  planner_options o = tiered({.token_budget = 64, .max_running = 4, .block_tokens = 16});
  // Learn the hashes of a 70-token prompt's blocks from a first planner.
  std::vector<kv::block_hash> hashes;
  {
    driver d(o, 100);
    ASSERT_EQ(d.planner.submit(make_seq(1, 70, 1)), admit_result::queued);
    while (!d.finished.contains(1)) {
      d.step();
      for (const auto& sv : d.planner.take_saves()) {
        if (sv.token_ids.empty()) hashes.push_back(sv.hash);
      }
    }
  }
  ASSERT_EQ(hashes.size(), 4u);
  driver d(o, 100);
  for (const auto& h : hashes) d.planner.ssd_stored(h);
  ASSERT_EQ(d.planner.submit(make_seq(7, 70, 3)), admit_result::queued);
  ASSERT_EQ(d.planner.submit(make_seq(8, 20, 3)), admit_result::queued);  // shares nothing past its first block
  auto plan = d.planner.plan();
  auto orders = d.planner.take_restores();
  ASSERT_EQ(orders.size(), 2u);
  EXPECT_EQ(orders[0].seq, 7u);
  // 70 tokens: 4 full blocks, all on the SSD (the last token is always computed).
  EXPECT_EQ(orders[0].hashes, hashes);
  EXPECT_EQ(orders[1].seq, 8u);
  ASSERT_EQ(orders[1].hashes.size(), 1u);
  for (const auto& item : plan.items) EXPECT_NE(item.seq, 7u) << "computing a sequence whose restore is pending";
  d.planner.commit(plan, {});
  EXPECT_TRUE(d.planner.plan().items.empty() || d.planner.find(7)->restoring);

  // Only two blocks come back: the rest is computed.
  auto loaded = d.planner.restore_done(orders[0].order, 2);
  EXPECT_EQ(loaded.size(), 2u);
  const sequence* s = d.planner.find(7);
  EXPECT_FALSE(s->restoring);
  EXPECT_EQ(s->n_computed, 32);
  EXPECT_EQ(s->cached_tokens, 32);
  EXPECT_EQ(s->blocks.size(), 2u);
  auto next = d.planner.plan();
  bool computes_rest = false;
  for (const auto& item : next.items) computes_rest |= item.seq == 7 && item.start == 32;
  EXPECT_TRUE(computes_rest);
  // A stale answer (the order already answered) loads nothing.
  EXPECT_TRUE(d.planner.restore_done(orders[0].order, 4).empty());
}

/// The saves of one sequence of `prompt` tokens 1, 2, ... and `max_new` sampled 7s, run alone.
std::vector<save_item> saves_of(const planner_options& o, int prompt, int max_new) {
  driver d(o, 100);
  EXPECT_EQ(d.planner.submit(make_seq(1, prompt, max_new)), admit_result::queued);
  std::vector<save_item> out;
  while (!d.finished.contains(1)) {
    d.step();
    for (auto& sv : d.planner.take_saves()) out.push_back(std::move(sv));
  }
  return out;
}

TEST(batch_planner, a_tail_on_the_ssd_comes_back_after_the_chain_with_the_tokens_it_shares) {
  planner_options o = tiered({.token_budget = 128, .max_running = 4, .block_tokens = 16});
  // 70 prompt tokens and one sampled: 4 full blocks and a tail holding tokens 65..70.
  const auto saves = saves_of(o, 70, 1);
  ASSERT_EQ(saves.size(), 5u);
  ASSERT_EQ(saves[4].token_ids, (std::vector<std::int32_t>{65, 66, 67, 68, 69, 70}));
  driver d(o, 100);
  for (const auto& sv : saves) d.planner.ssd_stored(sv.hash, sv.parent, sv.token_ids);
  // Shares the first 68 tokens: the 4 blocks, then 4 tokens of the tail.
  std::vector<std::int32_t> prompt(68);
  std::iota(prompt.begin(), prompt.end(), 1);
  prompt.insert(prompt.end(), {500, 501, 502});
  ASSERT_EQ(d.planner.submit(seq_of(7, prompt, 2)), admit_result::queued);
  d.planner.plan();
  auto orders = d.planner.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_EQ(orders[0].hashes.size(), 5u);
  EXPECT_EQ(orders[0].hashes[4], saves[4].hash);
  EXPECT_EQ(d.planner.restore_done(orders[0].order, 5).size(), 5u);
  const sequence* s = d.planner.find(7);
  EXPECT_EQ(s->n_computed, 68);
  EXPECT_EQ(s->cached_tokens, 68);
  EXPECT_EQ(d.planner.counters().ssd_hit_tokens, 68u);
  expect_one_item(d.planner.plan(), 68, 3);

  // The same prompt again: the full blocks are in RAM now (7 holds them), the tail is read from
  // the SSD again (7 writes on into its copy). Should that read fail, the tail is computed.
  ASSERT_EQ(d.planner.submit(seq_of(8, prompt, 2)), admit_result::queued);
  d.planner.plan();
  orders = d.planner.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_EQ(orders[0].hashes, std::vector<kv::block_hash>{saves[4].hash});
  EXPECT_TRUE(d.planner.restore_done(orders[0].order, 0).empty());
  EXPECT_EQ(d.planner.find(8)->n_computed, 64);
  EXPECT_EQ(d.planner.find(8)->blocks.size(), 4u);

  // Once the SSD drops it, the tail is not ordered any more.
  d.planner.ssd_forgotten(saves[4].hash);
  d.planner.cancel(7);
  d.planner.cancel(8);
  ASSERT_EQ(d.planner.submit(seq_of(9, prompt, 2)), admit_result::queued);
  d.planner.plan();
  orders = d.planner.take_restores();
  EXPECT_TRUE(orders.empty() || orders[0].hashes.size() == 4u);
}

TEST(batch_planner, a_cancelled_restore_answers_nothing_and_frees_its_blocks) {
  planner_options o = tiered({.token_budget = 64, .max_running = 4, .block_tokens = 16});
  driver d(o, 20);
  std::vector<kv::block_hash> hashes;
  {
    driver first(o, 100);
    ASSERT_EQ(first.planner.submit(make_seq(1, 40, 1)), admit_result::queued);
    while (!first.finished.contains(1)) {
      first.step();
      for (const auto& sv : first.planner.take_saves()) hashes.push_back(sv.hash);
    }
  }
  for (const auto& h : hashes) d.planner.ssd_stored(h);
  ASSERT_EQ(d.planner.submit(make_seq(3, 40, 1)), admit_result::queued);
  d.planner.plan();
  auto orders = d.planner.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_GT(d.pool.in_use(), 0);
  d.planner.cancel(3);
  EXPECT_EQ(d.pool.in_use(), 0);
  EXPECT_TRUE(d.planner.restore_done(orders[0].order, 2).empty());
  EXPECT_EQ(d.pool.in_use(), 0);
}

TEST(batch_planner, gives_every_decoding_sequence_a_token_before_any_prefill) {
  driver d({.token_budget = 64, .max_running = 8, .block_tokens = 16}, 1000);
  for (std::uint64_t i = 1; i <= 4; ++i) ASSERT_EQ(d.planner.submit(make_seq(i, 10, 100)), admit_result::queued);
  d.step();  // prefill of all four (40 tokens within 64)
  ASSERT_EQ(d.planner.submit(make_seq(99, 1000, 10)), admit_result::queued);
  for (int step = 0; step < 10; ++step) {
    auto plan = d.step();
    EXPECT_EQ(plan.n_decode, 4);
    EXPECT_LE(plan.n_tokens, 64);
    // The long prompt gets exactly what is left of the budget: 60 tokens per step.
    auto long_item = std::find_if(plan.items.begin(), plan.items.end(), [](auto& i) { return i.seq == 99; });
    ASSERT_NE(long_item, plan.items.end());
    EXPECT_EQ(long_item->n_tokens, 60);
    EXPECT_FALSE(long_item->sample);
  }
}

TEST(batch_planner, samples_only_when_a_chunk_reaches_the_end_of_the_prompt) {
  driver d({.token_budget = 32, .max_running = 2, .block_tokens = 8}, 100);
  d.planner.submit(make_seq(1, 70, 3));
  std::vector<int> chunks;
  for (int i = 0; i < 3; ++i) {
    auto plan = d.step();
    ASSERT_EQ(plan.items.size(), 1u);
    chunks.push_back(plan.items[0].n_tokens);
    EXPECT_EQ(plan.items[0].sample, i == 2);
  }
  EXPECT_EQ(chunks, (std::vector<int>{32, 32, 6}));
  EXPECT_EQ(d.planner.find(1)->tokens.size(), 71u);
}

TEST(batch_planner, a_full_queue_and_an_overlong_prompt_are_refused) {
  driver d({.token_budget = 32, .max_running = 1, .max_queued = 2, .max_context = 100}, 100);
  EXPECT_EQ(d.planner.submit(make_seq(1, 10, 10)), admit_result::queued);
  EXPECT_EQ(d.planner.submit(make_seq(2, 10, 10)), admit_result::queued);
  EXPECT_EQ(d.planner.submit(make_seq(3, 10, 10)), admit_result::queue_full);
  driver e({.token_budget = 32, .max_context = 100}, 100);
  EXPECT_EQ(e.planner.submit(make_seq(4, 95, 10)), admit_result::too_long);
  EXPECT_EQ(e.planner.submit(make_seq(5, 0, 10)), admit_result::too_long);
}

TEST(batch_planner, cancelling_releases_every_block) {
  driver d({.token_budget = 64, .max_running = 4, .block_tokens = 4}, 64);
  int free_before = d.pool.available();
  d.planner.submit(make_seq(1, 30, 50));
  d.planner.submit(make_seq(2, 30, 50));
  for (int i = 0; i < 5; ++i) d.step();
  EXPECT_LT(d.pool.available(), free_before);
  EXPECT_TRUE(d.planner.cancel(1));
  EXPECT_TRUE(d.planner.cancel(2));
  EXPECT_FALSE(d.planner.cancel(2));
  EXPECT_EQ(d.pool.available(), free_before);
  EXPECT_EQ(d.planner.running(), 0u);
}

TEST(batch_planner, cancelling_a_waiting_sequence_takes_it_out_of_the_queue_with_nothing_held) {
  driver d({.token_budget = 16, .max_running = 1, .block_tokens = 4, .max_context = 64}, 32);
  for (std::uint64_t i = 1; i <= 3; ++i) d.planner.submit(make_seq(i, 10, 20));
  for (int step = 0; step < 3; ++step) d.step();
  ASSERT_EQ(d.planner.running(), 1u);
  ASSERT_EQ(d.planner.waiting(), 2u);
  const int held_by_first = static_cast<int>(d.planner.find(1)->blocks.size());
  EXPECT_EQ(d.pool.in_use(), held_by_first);

  EXPECT_TRUE(d.planner.cancel(2));
  EXPECT_EQ(d.planner.waiting(), 1u);
  EXPECT_FALSE(d.planner.find(2));
  EXPECT_EQ(d.pool.in_use(), held_by_first) << "the running sequence keeps its blocks, the queue held none";

  // The cancelled one never runs; the others finish and everything is free again.
  for (int step = 0; step < 200 && d.finished.size() < 2; ++step) {
    for (const auto& item : d.step().items) EXPECT_NE(item.seq, 2u);
  }
  EXPECT_EQ(d.finished, (std::set<std::uint64_t>{1, 3}));
  EXPECT_EQ(d.pool.available(), 32);
  EXPECT_FALSE(d.planner.cancel(2));
}

TEST(batch_planner, running_out_of_blocks_preempts_and_everyone_still_finishes) {
  // 12 blocks of 4 tokens = 48 positions for 4 sequences that each grow to 10 + 20 = 30 (their
  // prompts differ, so the prefix cache cannot save the day).
  driver d(caching({.token_budget = 16, .max_running = 4, .block_tokens = 4, .max_context = 64}), 12);
  for (std::uint64_t i = 1; i <= 4; ++i) {
    auto s = make_seq(i, 10, 20);
    s.tokens[0] = static_cast<std::int32_t>(100 + i);
    d.planner.submit(std::move(s));
  }
  std::uint64_t preempted = 0;
  for (int step = 0; step < 2000 && d.finished.size() < 4; ++step) {
    auto plan = d.step();
    preempted += plan.preempted.size();
    ASSERT_LE(plan.n_tokens, 16);
    ASSERT_LE(d.pool.in_use(), 12);
  }
  EXPECT_EQ(d.finished.size(), 4u);
  EXPECT_GT(preempted, 0u);
  EXPECT_EQ(d.pool.available(), 12);
}

TEST(batch_planner, paused_sequences_get_no_decode_steps_until_resumed) {
  driver d({.token_budget = 32, .max_running = 2, .block_tokens = 8}, 100);
  d.planner.submit(make_seq(1, 5, 100));
  d.step();
  d.planner.set_paused(1, true);
  EXPECT_TRUE(d.step().empty());
  d.planner.set_paused(1, false);
  EXPECT_EQ(d.step().n_decode, 1);
}

TEST(batch_planner, a_repeated_prompt_starts_after_its_longest_cached_chain) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 10, 3));  // prompt 1..10, then 7 7 7; positions 0..11 computed
  while (d.finished.empty()) d.step();
  EXPECT_EQ(d.pool.cached_count(), 3);  // [1..4] [5..8] [9 10 7 7]

  d.planner.submit(make_seq(2, 10, 5));
  auto plan = d.step();
  expect_one_item(plan, 8, 2);  // two blocks reused; tokens 9 and 10 computed
  EXPECT_EQ(d.planner.find(2)->cached_tokens, 8);
  EXPECT_EQ(d.planner.counters().prefix_hit_tokens, 8u);
  EXPECT_EQ(d.planner.counters().prefix_query_tokens, 20u);
}

TEST(batch_planner, a_prompt_goes_on_from_the_tokens_it_shares_with_a_finished_sequences_last_block) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 10, 2));  // prompt 1..10, then 7 7; positions 0..10 computed
  while (d.finished.empty()) d.step();
  // [1..4] [5..8] cached as full blocks, [9 10 7] as the tail.
  EXPECT_EQ(d.pool.cached_count(), 3);
  const std::int32_t tail_block = [&] {
    auto b = d.pool.lookup(kv::prefix_hasher().chain(
        kv::prefix_hasher().chain(kv::prefix_hasher().chain(kv::prefix_hasher().root({{42, 43}, kv::kv_format::f16, 4, {}}),
                                                            std::vector<std::int32_t>{1, 2, 3, 4}),
                                  std::vector<std::int32_t>{5, 6, 7, 8}),
        std::vector<std::int32_t>{9, 10, 7}));
    EXPECT_TRUE(b);
    d.pool.release(*b);
    return b.value_or(-1);
  }();

  // Shares 9, 10, 7 with the tail, then goes on: it starts at position 11, in a copy of the tail's
  // block. The same prompt at the same time gets a copy too: the tail stays cached.
  std::vector<std::int32_t> next{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6};
  d.planner.submit(seq_of(2, next, 2));
  d.planner.submit(seq_of(3, next, 2));
  const auto plan = d.planner.plan();
  ASSERT_EQ(plan.items.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(plan.items[static_cast<std::size_t>(i)].seq, 2u + static_cast<unsigned>(i));
    EXPECT_EQ(plan.items[static_cast<std::size_t>(i)].start, 11);
    EXPECT_EQ(plan.items[static_cast<std::size_t>(i)].n_tokens, 2);
  }
  const auto copies = d.planner.take_copies();
  ASSERT_EQ(copies.size(), 2u);
  for (std::uint64_t id : {2u, 3u}) {
    const sequence* s = d.planner.find(id);
    EXPECT_EQ(s->cached_tokens, 11);
    EXPECT_NE(s->blocks.at(2), tail_block);
    EXPECT_EQ(d.pool.refcount(s->blocks.at(2)), 1);
    EXPECT_EQ(copies[id - 2].from, tail_block);
    EXPECT_EQ(copies[id - 2].to, s->blocks.at(2));
  }
  EXPECT_EQ(d.planner.counters().prefix_hit_tokens, 22u);
  d.planner.commit(plan, {7, 7});
  while (d.finished.size() < 3) d.step();

  // 2 filled [9 10 7 5] and left [6 7] as its tail (3's identical tail is not kept twice): a prompt
  // diverging inside the last block reuses the tokens before the divergence.
  d.planner.submit(seq_of(4, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6, 8, 8}, 1));
  expect_one_item(d.step(), 13, 2);
  // 4 left [6 8 8]. The last known token is computed even when a tail holds it.
  d.planner.submit(seq_of(5, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6, 8}, 1));
  expect_one_item(d.step(), 13, 1);
  while (d.finished.size() < 5) d.step();
  EXPECT_EQ(d.pool.in_use(), 0);
}

TEST(batch_planner, an_evicted_tail_is_a_miss) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 6);
  d.planner.submit(make_seq(1, 10, 2));
  while (d.finished.empty()) d.step();
  // Another prompt takes every block: the cached ones are evicted, the tail with them.
  std::vector<std::int32_t> other(22);
  std::iota(other.begin(), other.end(), 100);
  d.planner.submit(seq_of(2, other, 1));
  while (d.finished.size() < 2) d.step();
  d.planner.submit(seq_of(3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5}, 1));
  expect_one_item(d.step(), 0, 12);
  while (d.finished.size() < 3) d.step();
  EXPECT_EQ(d.pool.in_use(), 0);
}

TEST(batch_planner, the_last_known_token_is_always_computed) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 10, 3));
  while (d.finished.empty()) d.step();
  std::vector<std::int32_t> all{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 7};
  d.planner.submit(seq_of(2, all, 1));  // every block cached, but the logits of token 12 are needed
  auto plan = d.step();
  expect_one_item(plan, 8, 4);
  all.push_back(3);
  d.planner.submit(seq_of(3, all, 1));
  plan = d.step();
  auto it = std::find_if(plan.items.begin(), plan.items.end(), [](auto& i) { return i.seq == 3; });
  ASSERT_NE(it, plan.items.end());
  EXPECT_EQ(it->start, 12);
  EXPECT_EQ(it->n_tokens, 1);
}

TEST(batch_planner, nothing_is_reused_with_the_cache_off_or_across_formats) {
  driver off({.token_budget = 64, .max_running = 4, .block_tokens = 4}, 64);
  off.planner.submit(make_seq(1, 10, 3));
  while (off.finished.empty()) off.step();
  EXPECT_EQ(off.pool.cached_count(), 0);
  off.planner.submit(make_seq(2, 10, 1));
  EXPECT_EQ(off.step().items.at(0).start, 0);

  kv::pool_config pc;
  pc.space.capacity = {64, 64, 64};
  pc.budget = pc.cached_budget = 64;
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), pc);
  d.planner.submit(make_seq(1, 10, 3));
  while (d.finished.empty()) d.step();
  auto q8 = make_seq(2, 10, 5);
  q8.format = kv::kv_format::q8_0;
  d.planner.submit(std::move(q8));
  EXPECT_EQ(d.step().items.at(0).start, 0);
  EXPECT_EQ(d.planner.find(2)->cached_tokens, 0);
  for (auto b : d.planner.find(2)->blocks) EXPECT_EQ(d.pool.format_of(b), kv::kv_format::q8_0);
}

TEST(batch_planner, a_prompt_that_diverges_reuses_only_the_blocks_before_it) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 20, 1));
  while (d.finished.empty()) d.step();
  std::vector<std::int32_t> other(20);
  std::iota(other.begin(), other.end(), 1);
  other[9] = 99;  // inside block 2: blocks 0 and 1 match, 2 and later do not
  d.planner.submit(seq_of(2, other, 1));
  EXPECT_EQ(d.step().items.at(0).start, 8);
}

TEST(batch_planner, concurrent_sequences_share_a_prefix_that_one_of_them_filled) {
  driver d(caching({.token_budget = 16, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 40, 20));
  d.step();  // 16 tokens of 1's prompt
  d.planner.submit(make_seq(2, 40, 20));
  // 1's prompt takes the budget for one more step (32 tokens, 8 blocks published); 2 starts in
  // the third, beside 1's last 8 prompt tokens.
  while (!d.planner.find(2)->admitted) d.step();
  EXPECT_EQ(d.planner.find(2)->cached_tokens, 32);
  EXPECT_EQ(d.pool.refcount(d.planner.find(1)->blocks[0]), 2);
  EXPECT_EQ(d.planner.find(1)->blocks[7], d.planner.find(2)->blocks[7]);
  EXPECT_NE(d.planner.find(1)->blocks[8], d.planner.find(2)->blocks[8]);
  while (d.finished.size() < 2) d.step();
  EXPECT_EQ(d.pool.in_use(), 0);
}

class random_workload : public ::testing::TestWithParam<bool> {};

TEST_P(random_workload, keeps_blocks_and_budgets_consistent) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  planner_options o{.token_budget = 48, .max_running = 6, .max_queued = 20, .block_tokens = 8, .max_context = 256};
  driver d(GetParam() ? caching(o) : o, 40);
  std::uint64_t next = 1;
  for (int step = 0; step < 3000; ++step) {
    if (rng() % 3 == 0) d.planner.submit(make_seq(next++, 1 + static_cast<int>(rng() % 100), 1 + static_cast<int>(rng() % 40)));
    if (rng() % 17 == 0 && next > 1) d.planner.cancel(1 + rng() % next);
    auto plan = d.step();
    ASSERT_LE(plan.n_tokens, 48);
    std::set<std::uint64_t> seen;
    for (auto& item : plan.items) ASSERT_TRUE(seen.insert(item.seq).second) << "a sequence twice in one step";
    ASSERT_LE(d.planner.running(), 6u);
  }
  // Drain and check nothing leaked.
  for (std::uint64_t id = 1; id < next; ++id) d.planner.cancel(id);
  EXPECT_EQ(d.pool.available(), 40);
  EXPECT_EQ(d.pool.in_use(), 0);
  if (GetParam()) {
    EXPECT_GT(d.planner.counters().prefix_hit_tokens, 0u);  // every prompt starts 1, 2, 3, ...
  }
}

INSTANTIATE_TEST_SUITE_P(prefix_cache, random_workload, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "on" : "off"; });

}  // namespace
}  // namespace strata::sched
