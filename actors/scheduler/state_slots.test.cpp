// The planner's share of models with per-sequence state beyond their KV (recurrent layers): each
// running sequence holds a slot of that state, and with snapshots on, prompt chunks end at the
// snapshot boundaries (where the layers copy the state out).

#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "actors/scheduler/batch_planner.hpp"

namespace strata::sched {
namespace {

sequence prompt_of(std::uint64_t id, int prompt, int max_new) {
  sequence s;
  s.id = id;
  s.tokens.resize(static_cast<std::size_t>(prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), static_cast<std::int32_t>(id * 1000));
  s.max_new_tokens = max_new;
  return s;
}

/// Plans and commits one step (every sample draws 7); ends the sequences that drew max_new tokens.
step_plan step(batch_planner& p) {
  auto plan = p.plan();
  std::vector<std::int32_t> sampled;
  for (const auto& item : plan.items)
    if (item.sample) sampled.push_back(7);
  p.commit(plan, sampled);
  for (const auto& item : plan.items) {
    const sequence* s = p.find(item.seq);
    if (item.sample && s && static_cast<int>(s->tokens.size()) - s->n_prompt >= s->max_new_tokens) p.finish(item.seq);
  }
  return plan;
}

TEST(state_slots, every_running_sequence_holds_a_slot_of_its_own_and_a_preempted_one_starts_over_from_position_0) {
  planner_options o{.token_budget = 64, .max_running = 3, .block_tokens = 4, .max_context = 200, .state_slots = 3};
  kv::kv_cache_manager cache(cache_options_of(o), 24);  // 96 tokens: three growing sequences preempt
  batch_planner p(o, cache);
  for (std::uint64_t id = 1; id <= 5; ++id) ASSERT_EQ(p.submit(prompt_of(id, 20, 30)), admit_result::queued);
  std::set<std::uint64_t> restarted;
  for (int i = 0; i < 400 && (p.running() > 0 || p.waiting() > 0); ++i) {
    const auto plan = step(p);
    std::set<std::int32_t> slots;
    for (const auto& item : plan.items) {
      const sequence* s = p.find(item.seq);
      if (!s) continue;  // ended with this step
      EXPECT_GE(s->state_slot, 0) << "sequence " << item.seq;
      EXPECT_LT(s->state_slot, 3);
      EXPECT_TRUE(slots.insert(s->state_slot).second) << "slot " << s->state_slot << " held twice";
    }
    for (auto id : plan.preempted) {
      const sequence* s = p.find(id);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->state_slot, -1) << "a preempted sequence keeps no slot";
      EXPECT_EQ(s->n_computed, 0) << "never resumed from a half state";
      restarted.insert(id);
    }
  }
  EXPECT_EQ(p.running() + p.waiting(), 0u);
  EXPECT_FALSE(restarted.empty()) << "the pool was meant to be short";
}

TEST(state_slots, with_snapshots_on_a_prompt_chunk_ends_at_every_snapshot_boundary_and_at_the_prompts_last_one) {
  planner_options o{.token_budget = 64, .max_running = 2, .block_tokens = 8, .prefix_cache = true, .state_slots = 2,
                    .snapshots = true, .snapshot_every = 2};
  o.cache_ns.model = {1, 2};
  kv::kv_cache_manager cache(cache_options_of(o), 100);
  batch_planner p(o, cache);
  ASSERT_EQ(p.submit(prompt_of(1, 70, 2)), admit_result::queued);
  std::vector<std::int32_t> ends;
  for (int i = 0; i < 5; ++i) {
    const auto plan = step(p);
    ASSERT_EQ(plan.items.size(), 1u);
    ends.push_back(plan.items[0].start + plan.items[0].n_tokens);
  }
  EXPECT_EQ(ends, (std::vector<std::int32_t>{16, 32, 48, 64, 70}));
}

}  // namespace
}  // namespace strata::sched
