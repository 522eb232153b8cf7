#include "actors/scheduler/batch_planner.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

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
  kv::kv_cache_manager cache;
  batch_planner planner;
  std::map<std::uint64_t, int> generated;
  std::set<std::uint64_t> finished;
  driver(planner_options o, int blocks) : cache(cache_options_of(o), blocks), planner(o, cache) {}

  const kv::block_pool& pool() const { return cache.pool(); }

  step_plan step() {
    auto plan = planner.plan();
    // A step writes only blocks its sequence owns alone: a shared (cached) block is never
    // written again.
    for (auto& item : plan.items) {
      const auto blocks = cache.blocks(item.seq);
      const int bt = planner.options().block_tokens;
      for (int b = item.start / bt; b <= (item.start + item.n_tokens - 1) / bt; ++b) {
        EXPECT_EQ(pool().refcount(blocks[static_cast<std::size_t>(b)]), 1) << "sequence " << item.seq << " block " << b;
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

TEST(batch_planner, a_prompt_whose_chain_continues_on_the_ssd_waits_for_its_restore) {
  planner_options o = tiered({.token_budget = 64, .max_running = 4, .block_tokens = 16});
  // Learn the hashes of a 70-token prompt's blocks from a first planner.
  std::vector<kv::block_hash> hashes;
  {
    driver d(o, 100);
    ASSERT_EQ(d.planner.submit(make_seq(1, 70, 1)), admit_result::queued);
    while (!d.finished.contains(1)) {
      d.step();
      for (const auto& sv : d.cache.take_saves()) {
        if (sv.token_ids.empty()) hashes.push_back(sv.hash);
      }
    }
  }
  ASSERT_EQ(hashes.size(), 4u);
  driver d(o, 100);
  for (const auto& h : hashes) d.cache.ssd_stored(h);
  ASSERT_EQ(d.planner.submit(make_seq(7, 70, 3)), admit_result::queued);
  ASSERT_EQ(d.planner.submit(make_seq(8, 20, 3)), admit_result::queued);  // shares nothing past its first block
  auto plan = d.planner.plan();
  auto orders = d.cache.take_restores();
  ASSERT_EQ(orders.size(), 2u);
  EXPECT_EQ(orders[0].seq, 7u);
  // 70 tokens: 4 full blocks, all on the SSD (the last token is always computed).
  EXPECT_EQ(orders[0].hashes, hashes);
  EXPECT_EQ(orders[1].seq, 8u);
  ASSERT_EQ(orders[1].hashes.size(), 1u);
  for (const auto& item : plan.items) EXPECT_NE(item.seq, 7u) << "computing a sequence whose restore is pending";
  d.planner.commit(plan, {});
  EXPECT_TRUE(d.cache.restoring(7));
  for (const auto& item : d.planner.plan().items) EXPECT_NE(item.seq, 7u);

  // Only two blocks come back: the rest is computed.
  auto loaded = d.planner.restore_done(orders[0].order, 2);
  EXPECT_EQ(loaded.size(), 2u);
  const sequence* s = d.planner.find(7);
  EXPECT_FALSE(d.cache.restoring(7));
  EXPECT_EQ(s->n_computed, 32);
  EXPECT_EQ(s->cached_tokens, 32);
  EXPECT_EQ(d.planner.counters().ssd_hit_tokens, 32u);
  EXPECT_EQ(d.cache.blocks(7).size(), 2u);
  auto next = d.planner.plan();
  bool computes_rest = false;
  for (const auto& item : next.items) computes_rest |= item.seq == 7 && item.start == 32;
  EXPECT_TRUE(computes_rest);
  // A stale answer (the order already answered) loads nothing.
  EXPECT_TRUE(d.planner.restore_done(orders[0].order, 4).empty());
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
  int free_before = d.pool().available();
  d.planner.submit(make_seq(1, 30, 50));
  d.planner.submit(make_seq(2, 30, 50));
  for (int i = 0; i < 5; ++i) d.step();
  EXPECT_LT(d.pool().available(), free_before);
  EXPECT_TRUE(d.planner.cancel(1));
  EXPECT_TRUE(d.planner.cancel(2));
  EXPECT_FALSE(d.planner.cancel(2));
  EXPECT_EQ(d.pool().available(), free_before);
  EXPECT_EQ(d.planner.running(), 0u);
}

TEST(batch_planner, cancelling_a_waiting_sequence_takes_it_out_of_the_queue_with_nothing_held) {
  driver d({.token_budget = 16, .max_running = 1, .block_tokens = 4, .max_context = 64}, 32);
  for (std::uint64_t i = 1; i <= 3; ++i) d.planner.submit(make_seq(i, 10, 20));
  for (int step = 0; step < 3; ++step) d.step();
  ASSERT_EQ(d.planner.running(), 1u);
  ASSERT_EQ(d.planner.waiting(), 2u);
  const int held_by_first = static_cast<int>(d.cache.blocks(1).size());
  EXPECT_EQ(d.pool().in_use(), held_by_first);

  EXPECT_TRUE(d.planner.cancel(2));
  EXPECT_EQ(d.planner.waiting(), 1u);
  EXPECT_FALSE(d.planner.find(2));
  EXPECT_EQ(d.pool().in_use(), held_by_first) << "the running sequence keeps its blocks, the queue held none";

  // The cancelled one never runs; the others finish and everything is free again.
  for (int step = 0; step < 200 && d.finished.size() < 2; ++step) {
    for (const auto& item : d.step().items) EXPECT_NE(item.seq, 2u);
  }
  EXPECT_EQ(d.finished, (std::set<std::uint64_t>{1, 3}));
  EXPECT_EQ(d.pool().available(), 32);
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
    ASSERT_LE(d.pool().in_use(), 12);
  }
  EXPECT_EQ(d.finished.size(), 4u);
  EXPECT_GT(preempted, 0u);
  EXPECT_EQ(d.pool().available(), 12);
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

TEST(batch_planner, a_repeated_prompt_starts_after_what_the_cache_holds_of_it) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 10, 3));  // prompt 1..10, then 7 7 7; positions 0..11 computed
  while (d.finished.empty()) d.step();
  EXPECT_EQ(d.pool().cached_count(), 3);  // [1..4] [5..8] [9 10 7 7]

  d.planner.submit(make_seq(2, 10, 5));
  auto plan = d.step();
  expect_one_item(plan, 9, 1);  // two blocks and token 9 reused; token 10 computed
  EXPECT_EQ(d.planner.find(2)->cached_tokens, 9);
  EXPECT_EQ(d.planner.counters().prefix_hit_tokens, 9u);
  EXPECT_EQ(d.planner.counters().prefix_query_tokens, 20u);
}

TEST(batch_planner, a_prompt_sharing_part_of_a_finished_sequences_last_block_starts_after_the_shared_tokens) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 10, 2));  // prompt 1..10, then 7 7: [9 10 7] is left as a tail
  while (d.finished.empty()) d.step();
  d.planner.submit(seq_of(2, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5, 6}, 2));
  expect_one_item(d.step(), 11, 2);
  EXPECT_EQ(d.cache.take_copies().size(), 1u) << "the tail's pages are copied with the first step";
  EXPECT_EQ(d.planner.find(2)->cached_tokens, 11);
  EXPECT_EQ(d.planner.counters().prefix_hit_tokens, 11u);
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
  EXPECT_EQ(d.pool().refcount(d.cache.blocks(1)[0]), 2);
  EXPECT_EQ(d.cache.blocks(1)[7], d.cache.blocks(2)[7]);
  EXPECT_NE(d.cache.blocks(1)[8], d.cache.blocks(2)[8]);
  while (d.finished.size() < 2) d.step();
  EXPECT_EQ(d.pool().in_use(), 0);
}

TEST(batch_planner, a_choice_of_the_same_prompt_waits_for_the_first_to_compute_it_and_then_reuses_it) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  d.planner.submit(make_seq(1, 10, 3));
  auto second = make_seq(2, 10, 3);
  second.after = 1;
  d.planner.submit(std::move(second));
  expect_one_item(d.step(), 0, 10);  // the prompt is computed once
  auto plan = d.step();
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(plan.items[1].seq, 2u);
  EXPECT_EQ(plan.items[1].start, 8);  // two full blocks reused; the tail computed
  EXPECT_EQ(d.planner.find(2)->cached_tokens, 8);
  while (d.finished.size() < 2) d.step();
  EXPECT_EQ(d.pool().in_use(), 0);
}

TEST(batch_planner, a_choice_does_not_wait_for_a_sibling_without_the_prefix_cache) {
  driver d({.token_budget = 64, .max_running = 4, .block_tokens = 4}, 64);
  d.planner.submit(make_seq(1, 10, 3));
  auto second = make_seq(2, 10, 3);
  second.after = 1;
  d.planner.submit(std::move(second));
  EXPECT_EQ(d.step().items.size(), 2u);
}

TEST(batch_planner, a_prompt_takes_a_smaller_chunk_while_others_decode_and_the_whole_budget_once_none_do) {
  driver d({.token_budget = 64, .prefill_while_decoding = 16, .max_running = 4, .block_tokens = 4}, 64);
  d.planner.submit(make_seq(1, 10, 4));
  expect_one_item(d.step(), 0, 10);  // nothing decodes yet: the whole budget
  d.planner.submit(make_seq(2, 200, 1));
  std::int32_t done = 0;
  while (!d.finished.contains(1)) {
    const step_plan plan = d.step();
    ASSERT_EQ(plan.items.size(), 2u);
    EXPECT_EQ(plan.items[0].seq, 1u);
    EXPECT_EQ(plan.items[0].n_tokens, 1);
    EXPECT_EQ(plan.items[1].seq, 2u);
    EXPECT_EQ(plan.items[1].start, done);
    EXPECT_EQ(plan.items[1].n_tokens, 16);
    done += 16;
  }
  expect_one_item(d.step(), done, 64);
}

class random_workload : public ::testing::TestWithParam<bool> {};

TEST_P(random_workload, keeps_blocks_and_budgets_consistent) {
  const unsigned seed = test_seed();
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
  EXPECT_EQ(d.pool().available(), 40);
  EXPECT_EQ(d.pool().in_use(), 0);
  if (GetParam()) {
    EXPECT_GT(d.planner.counters().prefix_hit_tokens, 0u);  // every prompt starts 1, 2, 3, ...
  }
}

INSTANTIATE_TEST_SUITE_P(prefix_cache, random_workload, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "on" : "off"; });


TEST(batch_planner, blocks_and_tails_are_reused_only_under_the_same_cache_salt) {
  driver d(caching({.token_budget = 64, .max_running = 4, .block_tokens = 4}), 64);
  auto salted = [](sequence s, std::string_view salt) {
    s.salt = kv::make_cache_salt("", salt);
    return s;
  };
  d.planner.submit(salted(make_seq(1, 10, 2), "a"));  // [1..4] [5..8] cached, [9 10 7] the tail
  while (d.finished.empty()) d.step();
  // Shares both full blocks and the tail's three tokens with sequence 1.
  const std::vector<std::int32_t> next{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 5};
  d.planner.submit(salted(seq_of(2, next, 1), "b"));
  expect_one_item(d.step(), 0, 12);
  d.planner.submit(seq_of(3, next, 1));
  expect_one_item(d.step(), 0, 12);
  d.planner.submit(salted(seq_of(4, next, 2), "a"));
  expect_one_item(d.step(), 11, 1);
  EXPECT_EQ(d.planner.find(4)->cached_tokens, 11);
  while (d.finished.size() < 4) d.step();
  EXPECT_EQ(d.pool().in_use(), 0);
}

}  // namespace
}  // namespace strata::sched
