#include "src/kv/block_pool.hpp"

#include <random>
#include <set>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace strata::kv {
namespace {

block_hash h(std::uint64_t v) { return {{v, ~v, v * 3, 1}}; }

TEST(block_pool, hands_out_every_block_once_then_reports_exhaustion) {
  block_pool pool(4);
  std::set<std::int32_t> got;
  for (int i = 0; i < 4; ++i) {
    auto b = pool.allocate();
    ASSERT_TRUE(b);
    EXPECT_TRUE(got.insert(*b).second);
  }
  EXPECT_FALSE(pool.allocate());  // an answer, not a crash
  EXPECT_EQ(pool.available(), 0);
  pool.release(*got.begin());
  EXPECT_EQ(pool.available(), 1);
  EXPECT_TRUE(pool.allocate());
}

TEST(block_pool, a_released_hashed_block_is_found_again_by_its_hash) {
  block_pool pool(2);
  auto b = *pool.allocate();
  pool.set_hash(b, h(7));
  pool.release(b);
  EXPECT_EQ(pool.cached_count(), 1);
  auto hit = pool.lookup(h(7));
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, b);
  EXPECT_EQ(pool.refcount(b), 1);
  EXPECT_EQ(pool.cached_count(), 0);
  EXPECT_FALSE(pool.lookup(h(8)));
}

TEST(block_pool, shared_blocks_stay_in_use_until_the_last_reference_goes) {
  block_pool pool(2);
  auto b = *pool.allocate();
  pool.set_hash(b, h(1));
  auto again = pool.lookup(h(1));
  ASSERT_TRUE(again);
  EXPECT_EQ(pool.refcount(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.in_use(), 1);
  pool.release(b);
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.cached_count(), 1);
}

TEST(block_pool, evicts_least_recently_released_cached_block_first) {
  block_pool pool(3);
  auto a = *pool.allocate(), b = *pool.allocate(), c = *pool.allocate();
  pool.set_hash(a, h(1));
  pool.set_hash(b, h(2));
  pool.set_hash(c, h(3));
  pool.release(b);
  pool.release(a);
  pool.release(c);
  auto first = pool.allocate();  // evicts b, released first
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, b);
  EXPECT_FALSE(pool.lookup(h(2)));
  EXPECT_TRUE(pool.lookup(h(1)));
  EXPECT_EQ(pool.evictions(), 1u);
}

TEST(block_pool, prefers_free_blocks_over_evicting_cached_ones) {
  block_pool pool(2);
  auto a = *pool.allocate();
  pool.set_hash(a, h(1));
  pool.release(a);
  auto b = pool.allocate();
  ASSERT_TRUE(b);
  EXPECT_NE(*b, a);
  EXPECT_TRUE(pool.lookup(h(1)));
}

TEST(block_pool, keeps_at_most_the_cached_limit_of_unused_blocks) {
  block_pool pool(4, 2);
  auto a = *pool.allocate(), b = *pool.allocate(), c = *pool.allocate();
  pool.set_hash(a, h(1));
  pool.set_hash(b, h(2));
  pool.set_hash(c, h(3));
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.cached_count(), 2);
  pool.release(c);  // over the limit: a, the least recently released, goes
  EXPECT_EQ(pool.cached_count(), 2);
  EXPECT_EQ(pool.evictions(), 1u);
  EXPECT_FALSE(pool.lookup(h(1)));
  EXPECT_EQ(pool.free_count(), 2);
  auto hit = pool.lookup(h(2));
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, b);
}

TEST(block_pool, a_cached_limit_of_zero_caches_nothing) {
  block_pool pool(2, 0);
  auto a = *pool.allocate();
  pool.set_hash(a, h(1));
  EXPECT_TRUE(pool.lookup(h(1)));  // shared while in use
  pool.release(a);
  pool.release(a);
  EXPECT_EQ(pool.cached_count(), 0);
  EXPECT_FALSE(pool.lookup(h(1)));
  EXPECT_EQ(pool.free_count(), 2);
}

TEST(block_pool, a_hashed_block_with_no_room_to_stay_cached_is_logged_as_evicted_for_a_lower_tier) {
  block_pool pool(3, 0);
  pool.record_evictions(true);
  auto a = *pool.allocate(), b = *pool.allocate();
  pool.set_hash(a, h(1), h(9));
  pool.release(b);  // unhashed: nothing to keep
  EXPECT_TRUE(pool.take_evictions().empty());
  pool.release(a);
  const auto e = pool.take_evictions();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].id, a);
  EXPECT_EQ(e[0].hash, h(1));
  EXPECT_EQ(e[0].parent, h(9));
  EXPECT_FALSE(pool.contains(h(1)));
  EXPECT_EQ(pool.evictions(), 0u) << "it was never cached: not counted as a cache eviction";
}

pool_config mixed(std::int64_t budget, std::int64_t cached_budget) {
  pool_config c;
  c.block_bytes = {64, 34, 18};  // f16, q8_0, q4_0 rows of 32 values
  c.space.capacity = {static_cast<std::int32_t>(budget / 64), static_cast<std::int32_t>(budget / 34),
                      static_cast<std::int32_t>(budget / 18)};
  c.budget = budget;
  c.cached_budget = cached_budget;
  return c;
}

TEST(block_pool, formats_share_one_byte_budget_and_own_their_id_ranges) {
  block_pool pool(mixed(256, 256));
  EXPECT_EQ(pool.available(kv_format::f16), 4);
  EXPECT_EQ(pool.available(kv_format::q8_0), 7);
  EXPECT_EQ(pool.available(kv_format::q4_0), 14);
  auto a = *pool.allocate(kv_format::f16), b = *pool.allocate(kv_format::f16);
  EXPECT_EQ(pool.format_of(a), kv_format::f16);
  EXPECT_EQ(pool.available(kv_format::q4_0), 7);  // (256 - 128) / 18
  std::vector<std::int32_t> q4;
  while (auto id = pool.allocate(kv_format::q4_0)) {
    EXPECT_EQ(pool.format_of(*id), kv_format::q4_0);
    q4.push_back(*id);
  }
  EXPECT_EQ(q4.size(), 7u);
  EXPECT_EQ(pool.bytes_in_use(), 128 + 7 * 18);
  EXPECT_FALSE(pool.allocate(kv_format::f16));
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.available(kv_format::q8_0), (256 - 7 * 18) / 34);
}

TEST(block_pool, cached_blocks_of_one_format_make_room_for_another) {
  block_pool pool(mixed(256, 256));
  std::vector<std::int32_t> q8;
  for (int i = 0; i < 7; ++i) {
    q8.push_back(*pool.allocate(kv_format::q8_0));
    pool.set_hash(q8.back(), h(static_cast<std::uint64_t>(i)));
  }
  for (auto id : q8) pool.release(id);
  EXPECT_EQ(pool.cached_count(), 7);
  EXPECT_EQ(pool.available(kv_format::f16), 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.allocate(kv_format::f16));
  EXPECT_EQ(pool.cached_count(), 0);  // 4 * 64 = the whole budget: every cached q8_0 block went
  EXPECT_EQ(pool.evictions(), 7u);
  EXPECT_FALSE(pool.lookup(h(6)));
}

TEST(block_pool, random_mixed_formats_stay_within_both_budgets) {
  const auto seed = test_seed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const std::int64_t budget = 2000, cached_budget = static_cast<std::int64_t>(rng() % 2000);
  block_pool pool(mixed(budget, cached_budget));
  std::vector<std::int32_t> held;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) {
      if (auto b = pool.allocate(k_kv_formats[rng() % 3])) {
        held.push_back(*b);
        if (rng() % 2) pool.set_hash(*b, h(rng() % 64));
      }
    } else if (op == 1 && !held.empty()) {
      auto i = rng() % held.size();
      pool.release(held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    } else if (op == 2) {
      if (auto b = pool.lookup(h(rng() % 64))) held.push_back(*b);
    }
    std::int64_t bytes = 0;
    std::set<std::int32_t> distinct(held.begin(), held.end());
    for (auto id : distinct) bytes += pool.format_of(id) == kv_format::f16 ? 64 : pool.format_of(id) == kv_format::q8_0 ? 34 : 18;
    ASSERT_EQ(pool.bytes_in_use(), bytes);
    ASSERT_LE(pool.bytes_in_use() + pool.bytes_cached(), budget);
    ASSERT_LE(pool.bytes_cached(), cached_budget);
    ASSERT_EQ(pool.free_count() + pool.cached_count() + pool.in_use(), pool.capacity());
  }
}

TEST(block_pool, misuse_of_references_is_reported) {
  block_pool pool(1);
  EXPECT_THROW(pool.release(0), std::logic_error);
  EXPECT_THROW(pool.retain(0), std::logic_error);
}

TEST(block_pool, random_operations_keep_the_counts_consistent) {
  const auto seed = test_seed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const auto limit = static_cast<std::int32_t>(rng() % 17);
  block_pool pool(16, limit);
  std::vector<std::int32_t> held;
  for (int step = 0; step < 20000; ++step) {
    int op = static_cast<int>(rng() % 4);
    if (op == 0) {
      if (auto b = pool.allocate()) {
        held.push_back(*b);
        if (rng() % 2) pool.set_hash(*b, h(rng() % 32));
      }
    } else if (op == 1 && !held.empty()) {
      auto i = rng() % held.size();
      pool.release(held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    } else if (op == 2) {
      if (auto b = pool.lookup(h(rng() % 32))) held.push_back(*b);
    } else if (op == 3 && !held.empty()) {
      auto id = held[rng() % held.size()];
      pool.retain(id);
      held.push_back(id);
    }
    std::set<std::int32_t> distinct(held.begin(), held.end());
    ASSERT_EQ(pool.in_use(), static_cast<std::int32_t>(distinct.size()));
    ASSERT_EQ(pool.free_count() + pool.cached_count() + pool.in_use(), pool.capacity());
    ASSERT_LE(pool.cached_count(), limit);
  }
}

}  // namespace
}  // namespace strata::kv
