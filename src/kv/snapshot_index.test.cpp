// Frozen boundary snapshots in the kv_cache_manager: where a sequence resumes, what an evicted
// snapshot takes with it, and the hot tier's budget.

#include "src/kv/snapshot_index.hpp"

#include <numeric>

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/kv_test_tokens.hpp"

namespace strata::kv {
namespace {

using test_tokens::iota_tokens;
using test_tokens::tokens_t;
constexpr std::int32_t k_block = 4;

cache_options with_snapshots(std::int32_t every) {
  cache_options o;
  o.block_tokens = k_block;
  o.prefix_cache = true;
  o.ns.model = {42, 43};
  o.snapshots = {.on = true, .block_tokens = k_block, .every = every};
  return o;
}

/// Blocks of 100 bytes; `cached` bytes of them (and their snapshots) may stay cached.
pool_config bytes_pool(std::int64_t budget, std::int64_t cached) {
  pool_config p;
  p.space.capacity = {static_cast<std::int32_t>(budget / 100), 0, 0};
  p.block_bytes = {100, 100, 100};
  p.budget = budget;
  p.cached_budget = cached;
  return p;
}

/// A snapshot whose single layer holds `bytes` bytes of value `tag`.
state_snapshot snap(std::size_t bytes, std::byte tag) { return state_snapshot{{std::vector<std::byte>(bytes, tag)}}; }

/// Sequence id matches `tokens`, covers them all and publishes them as computed.
void compute_all(kv_cache_manager& m, std::uint64_t id, const tokens_t& tokens) {
  m.match(id, kv_format::f16, tokens);
  (void)m.take_resume(id);
  const auto n = static_cast<std::int32_t>(tokens.size());
  ASSERT_EQ(m.cover(id, n), n);
  m.publish(id, tokens, n);
}

/// A sequence that computes all of `tokens`, taking a snapshot of `bytes` at each boundary in
/// `at` (tagged with the boundary's block count), then lets go.
void run_with_snapshots(kv_cache_manager& m, std::uint64_t id, const tokens_t& tokens, const std::vector<std::int32_t>& at,
                        std::size_t bytes = 10) {
  compute_all(m, id, tokens);
  const auto n = static_cast<std::int32_t>(tokens.size());
  for (auto end : at) m.add_snapshot(id, tokens, end, snap(bytes, static_cast<std::byte>(end / k_block)));
  m.release(id, tokens, n);
}

TEST(snapshot_policy, snapshots_fall_every_n_blocks_and_at_the_prompts_last_boundary) {
  snapshot_policy p{.on = true, .block_tokens = 4, .every = 2};
  EXPECT_TRUE(p.at(8, 30));
  EXPECT_TRUE(p.at(16, 30));
  EXPECT_FALSE(p.at(4, 30));
  EXPECT_FALSE(p.at(9, 30));
  EXPECT_TRUE(p.at(28, 30));  // the prompt's last whole block ends there
  EXPECT_EQ(p.next_after(0, 30), 8);
  EXPECT_EQ(p.next_after(8, 30), 16);
  EXPECT_EQ(p.next_after(25, 30), 28);
  EXPECT_EQ(p.next_after(28, 30), 32);
  // In the reply (past the prompt's 30 tokens) every boundary is one, those off the every-th
  // kept only until the sequence's next.
  EXPECT_TRUE(p.at(36, 30));
  EXPECT_TRUE(p.in_reply(36, 30));
  EXPECT_TRUE(p.at(40, 30));
  EXPECT_FALSE(p.in_reply(40, 30));  // every second block: a snapshot like the prompt's
  EXPECT_FALSE(p.in_reply(28, 30));
  EXPECT_FALSE(p.at(37, 30));
  snapshot_policy only_prompt{.on = true, .block_tokens = 4, .every = 0};
  EXPECT_FALSE(only_prompt.at(8, 30));
  EXPECT_EQ(only_prompt.next_after(0, 30), 28);
  EXPECT_FALSE(snapshot_policy{}.at(8, 30));
}

TEST(snapshot_index, a_sequence_resumes_at_the_deepest_boundary_with_a_snapshot_not_at_the_end_of_its_cached_chain) {
  kv_cache_manager m(with_snapshots(2), bytes_pool(100000, 50000));
  const tokens_t first = iota_tokens(40);
  run_with_snapshots(m, 1, first, {8, 16, 24});
  tokens_t next = first;
  next.push_back(77);
  // All ten blocks are cached, but the state exists only at 8, 16 and 24 tokens.
  EXPECT_EQ(m.match(2, kv_format::f16, next), 24);
  EXPECT_EQ(m.blocks(2).size(), 6u);
  // The scheduler takes the snapshot with the sequence's first step, after the plan covered it.
  ASSERT_EQ(m.cover(2, 41), 41);
  auto resume = m.take_resume(2);
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->layers.at(0).at(0), std::byte{6});
  EXPECT_FALSE(m.take_resume(2));  // taken once
  EXPECT_EQ(m.snapshot_figures().restores, 1u);
  EXPECT_EQ(m.snapshot_figures().hit_tokens, 24u);
  // The blocks after the resume point are the sequence's own again: nothing it writes is shared.
  for (std::size_t i = 6; i < m.blocks(2).size(); ++i) EXPECT_EQ(m.pool().refcount(m.blocks(2)[i]), 1);
}

TEST(snapshot_index, a_sequence_keeps_only_its_replys_latest_snapshot_and_the_next_turn_resumes_there) {
  kv_cache_manager m(with_snapshots(0), bytes_pool(100000, 50000));
  // A prompt of 10 tokens (its last boundary at 8), then a reply computed up to 27 tokens.
  const tokens_t first = iota_tokens(27);
  compute_all(m, 1, first);
  m.add_snapshot(1, first, 8, snap(10, std::byte{2}));
  for (std::int32_t end : {12, 16, 20, 24}) m.add_snapshot(1, first, end, snap(10, static_cast<std::byte>(end / k_block)), true);
  // Until the sequence lets go, only the prompt's snapshot is in the cache.
  EXPECT_EQ(m.snapshot_figures().count, 1);
  m.release(1, first, 27);
  EXPECT_EQ(m.snapshot_figures().count, 2);
  EXPECT_EQ(m.snapshot_figures().bytes, 20);
  // The next turn repeats the reply: it resumes at the reply's last boundary (24), not at 8.
  tokens_t next = first;
  next.push_back(77);
  EXPECT_EQ(m.match(2, kv_format::f16, next), 24);
  ASSERT_EQ(m.cover(2, 28), 28);
  auto resume = m.take_resume(2);
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->layers.at(0).at(0), std::byte{6});
  // The reply's earlier boundaries were never kept: a prompt that parts at 21 resumes at 8.
  tokens_t parted(first.begin(), first.begin() + 21);
  parted.push_back(99);
  EXPECT_EQ(m.match(3, kv_format::f16, parted), 8);
}

TEST(snapshot_index, a_reply_snapshot_before_a_kept_boundary_is_dropped_as_adding_nothing) {
  kv_cache_manager m(with_snapshots(0), bytes_pool(100000, 50000));
  const tokens_t first = iota_tokens(27);
  compute_all(m, 1, first);
  m.add_snapshot(1, first, 20, snap(10, std::byte{5}), true);
  m.add_snapshot(1, first, 24, snap(10, std::byte{6}));  // e.g. an every-th boundary
  m.release(1, first, 27);
  EXPECT_EQ(m.snapshot_figures().count, 1);
  EXPECT_EQ(m.snapshot_figures().bytes, 10);
}

TEST(snapshot_index, a_reply_snapshot_is_not_kept_when_the_prefix_cache_was_turned_off_meanwhile) {
  kv_cache_manager m(with_snapshots(0), bytes_pool(100000, 50000));
  const tokens_t first = iota_tokens(27);
  compute_all(m, 1, first);
  m.add_snapshot(1, first, 24, snap(10, std::byte{6}), true);
  m.set_mode(false, false);
  m.release(1, first, 27);
  EXPECT_EQ(m.snapshot_figures().count, 0);
  EXPECT_EQ(m.pool().in_use(), 0);
}

TEST(snapshot_index, without_a_snapshot_nothing_is_reused_and_no_cached_block_is_held) {
  kv_cache_manager m(with_snapshots(2), bytes_pool(100000, 50000));
  const tokens_t first = iota_tokens(40);
  run_with_snapshots(m, 1, first, {});
  EXPECT_EQ(m.match(2, kv_format::f16, first), 0);
  EXPECT_TRUE(m.blocks(2).empty());
  EXPECT_FALSE(m.take_resume(2));
  EXPECT_EQ(m.pool().in_use(), 0);
}

TEST(snapshot_index, a_snapshot_goes_with_its_evicted_block_and_its_boundary_is_no_longer_a_resume_point) {
  // Room for 12 cached blocks with their snapshots.
  kv_cache_manager m(with_snapshots(2), bytes_pool(100000, 12 * 100 + 3 * 50));
  const tokens_t first = iota_tokens(40);
  run_with_snapshots(m, 1, first, {8, 16, 24}, 50);
  EXPECT_EQ(m.snapshot_figures().count, 3);
  EXPECT_EQ(m.snapshot_figures().bytes, 150);
  EXPECT_EQ(m.pool().bytes_cached(), 10 * 100 + 150);
  // Four more cached blocks need 400 bytes: the least recently released go, the chain's first
  // block (100) and its second (100, and the 50 of the snapshot at 8 tokens hanging on it).
  run_with_snapshots(m, 2, iota_tokens(16, 1000), {});
  EXPECT_LE(m.pool().bytes_cached(), 12 * 100 + 150);
  EXPECT_EQ(m.snapshot_figures().count, 2);
  EXPECT_EQ(m.snapshot_figures().bytes, 100);
  // The snapshots at 16 and 24 tokens are kept, but their chain lacks its first blocks: never a
  // resume point then.
  tokens_t next = first;
  next.push_back(77);
  EXPECT_EQ(m.match(3, kv_format::f16, next), 0);
  EXPECT_FALSE(m.take_resume(3));
  EXPECT_TRUE(m.blocks(3).empty());
}

TEST(snapshot_index, two_hundred_distinct_prefixes_never_push_snapshots_past_the_hot_budget) {
  const std::int64_t hot = 20 * 100 + 10 * 60;
  kv_cache_manager m(with_snapshots(1), bytes_pool(100000, hot));
  for (int i = 0; i < 200; ++i) {
    const tokens_t t = iota_tokens(16, 10000 * (i + 1));
    run_with_snapshots(m, static_cast<std::uint64_t>(i + 1), t, {4, 8, 12, 16}, 60);
    EXPECT_LE(m.pool().bytes_cached(), hot) << "after prefix " << i;
    EXPECT_LE(m.snapshot_figures().bytes, hot) << "after prefix " << i;
    EXPECT_EQ(m.pool().in_use(), 0);
  }
  EXPECT_GT(m.snapshot_figures().count, 0);
  EXPECT_EQ(m.snapshot_figures().taken, 800u);
  // The newest prefix is still a resume point.
  tokens_t last = iota_tokens(16, 10000 * 200);
  last.push_back(1);
  EXPECT_EQ(m.match(999, kv_format::f16, last), 16);
}

}  // namespace
}  // namespace strata::kv
