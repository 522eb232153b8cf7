#include "actors/scheduler/batch_planner.hpp"

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

/// Runs plan/commit like the scheduler would, finishing sequences after max_new_tokens.
struct driver {
  kv::block_pool pool;
  batch_planner planner;
  std::map<std::uint64_t, int> generated;
  std::set<std::uint64_t> finished;
  driver(planner_options o, int blocks) : pool(blocks), planner(o, pool) {}

  step_plan step() {
    auto plan = planner.plan();
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

TEST(batch_planner, running_out_of_blocks_preempts_and_everyone_still_finishes) {
  // 12 blocks of 4 tokens = 48 positions for 4 sequences that each grow to 10 + 20 = 30.
  driver d({.token_budget = 16, .max_running = 4, .block_tokens = 4, .max_context = 64}, 12);
  for (std::uint64_t i = 1; i <= 4; ++i) d.planner.submit(make_seq(i, 10, 20));
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

TEST(batch_planner, random_workloads_keep_blocks_and_budgets_consistent) {
  std::mt19937 rng(std::random_device{}());
  driver d({.token_budget = 48, .max_running = 6, .max_queued = 20, .block_tokens = 8, .max_context = 256}, 40);
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
}

}  // namespace
}  // namespace strata::sched
