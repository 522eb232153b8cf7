#include "actors/scheduler/deferred_saves.hpp"

#include <gtest/gtest.h>

namespace strata::sched {
namespace {

kv::block_hash h(std::uint64_t v) { return {{v, ~v, v * 5, 2}}; }

/// A cached block (refcount 0, hashed) holding h(v).
std::int32_t cache(kv::block_pool& pool, std::uint64_t v) {
  auto b = *pool.allocate();
  pool.set_hash(b, h(v));
  pool.release(b);
  return b;
}

save_item item(std::uint64_t v) { return save_item{-1, h(v), h(v - 1), kv::kv_format::f16, {}}; }

TEST(deferred_saves, gives_back_the_saves_ram_still_holds_with_their_blocks_and_counts_the_rest_lost) {
  kv::block_pool pool(4);
  const auto b1 = cache(pool, 1);
  const auto b3 = cache(pool, 3);
  deferred_saves d;
  for (std::uint64_t v : {1, 2, 3}) d.add(item(v));  // h(2) is in no block: evicted meanwhile
  d.add(item(1));                                     // kept once
  EXPECT_EQ(d.size(), 3u);

  std::vector<kv::block_hash> lost;
  auto saves = d.take(pool, 1 << 20, lost);
  ASSERT_EQ(saves.size(), 2u);
  EXPECT_EQ(saves[0].hash, h(1));
  EXPECT_EQ(saves[0].block, b1);
  EXPECT_EQ(saves[0].parent, h(0));
  EXPECT_EQ(saves[1].hash, h(3));
  EXPECT_EQ(saves[1].block, b3);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], h(2));
  EXPECT_TRUE(d.empty());
  // Taking them looked them up and gave them back: still cached, nobody holds them.
  EXPECT_EQ(pool.refcount(b1), 0);
  EXPECT_EQ(pool.cached_count(), 2);
}

TEST(deferred_saves, one_take_stays_within_its_bytes_and_the_rest_waits_in_order) {
  kv::block_pool pool(8);  // blocks of one byte each
  deferred_saves d;
  for (std::uint64_t v = 1; v <= 5; ++v) {
    cache(pool, v);
    d.add(item(v));
  }
  std::vector<kv::block_hash> lost;
  auto first = d.take(pool, 2, lost);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].hash, h(2));
  auto second = d.take(pool, 0, lost);  // always at least one
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].hash, h(3));
  EXPECT_EQ(d.size(), 2u);
  EXPECT_TRUE(lost.empty());
}

TEST(deferred_saves, outgrowing_the_pool_drops_only_the_evicted_blocks) {
  kv::block_pool pool(2);
  cache(pool, 1);
  deferred_saves d;
  d.add(item(1));
  d.add(item(2));
  std::vector<kv::block_hash> lost;
  d.prune(pool, lost);  // no more than the pool's blocks yet: nothing checked
  EXPECT_TRUE(lost.empty());
  d.add(item(3));
  d.prune(pool, lost);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0], h(2));
  EXPECT_EQ(lost[1], h(3));
  EXPECT_EQ(d.size(), 1u);
  d.add(item(2));  // forgotten: may come again
  EXPECT_EQ(d.size(), 2u);
}

}  // namespace
}  // namespace strata::sched
