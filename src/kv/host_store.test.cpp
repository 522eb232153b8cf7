#include "src/kv/host_store.hpp"

#include <algorithm>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace strata::kv {
namespace {

block_hash hash_of(std::uint64_t i) { return block_hash{{i, i * 7 + 1, 3, 4}}; }

host_record record(std::uint64_t i, std::size_t bytes) {
  host_record r;
  r.hash = hash_of(i);
  r.parent = hash_of(i + 1000);
  r.bytes.assign(bytes, static_cast<std::byte>(i & 0xff));
  return r;
}

TEST(host_store, keeps_frozen_blocks_by_hash_and_evicts_the_least_recently_used_past_its_budget) {
  host_store s(300);
  EXPECT_TRUE(s.put(record(1, 100)).empty());
  EXPECT_TRUE(s.put(record(2, 100)).empty());
  EXPECT_TRUE(s.put(record(3, 100)).empty());
  EXPECT_EQ(s.bytes(), 300);
  ASSERT_NE(s.get(hash_of(1)), nullptr);  // 1 is the newest now: 2 goes first
  auto gone = s.put(record(4, 150));
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[0].hash, hash_of(2));
  EXPECT_EQ(gone[1].hash, hash_of(3));
  EXPECT_EQ(gone[0].bytes.size(), 100u) << "an evicted record keeps its bytes, to go on to the SSD";
  EXPECT_TRUE(s.contains(hash_of(1)));
  EXPECT_TRUE(s.contains(hash_of(4)));
  EXPECT_EQ(s.bytes(), 250);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.stats().evictions, 2u);
  EXPECT_EQ(s.get(hash_of(2)), nullptr);
  EXPECT_EQ(s.stats().hits, 1u);
  EXPECT_EQ(s.stats().misses, 1u);
}

TEST(host_store, a_record_taken_leaves_the_store_with_its_bytes) {
  host_store s(1000);
  s.put(record(1, 100));
  s.put(record(2, 200));
  auto r = s.take(hash_of(2));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->bytes.size(), 200u);
  EXPECT_EQ(r->parent, hash_of(1002));
  EXPECT_FALSE(s.contains(hash_of(2)));
  EXPECT_EQ(s.bytes(), 100);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_FALSE(s.take(hash_of(2)));
  EXPECT_EQ(s.stats().hits, 1u);
  EXPECT_EQ(s.stats().misses, 1u);
  // What is left still evicts in order.
  auto gone = s.put(record(3, 950));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].hash, hash_of(1));
}

TEST(host_store, a_record_larger_than_the_budget_is_handed_back_and_changes_nothing) {
  host_store s(100);
  ASSERT_TRUE(s.put(record(1, 60)).empty());
  auto gone = s.put(record(2, 101));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].hash, hash_of(2));
  EXPECT_TRUE(s.contains(hash_of(1)));
  EXPECT_FALSE(s.contains(hash_of(2)));
  EXPECT_EQ(s.bytes(), 60);
  EXPECT_EQ(s.stats().refused, 1u);
}

TEST(host_store, a_hash_stored_again_replaces_its_record_and_a_read_gives_its_bytes) {
  host_store s(1000);
  s.put(record(5, 10));
  auto again = record(5, 30);
  again.bytes[0] = std::byte{0x42};
  s.put(std::move(again));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.bytes(), 30);
  const host_record* r = s.get(hash_of(5));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->bytes.size(), 30u);
  EXPECT_EQ(r->bytes[0], std::byte{0x42});
  EXPECT_EQ(r->parent, hash_of(1005));
  EXPECT_EQ(s.clear().size(), 1u);
  EXPECT_EQ(s.bytes(), 0);
  EXPECT_FALSE(s.contains(hash_of(5)));
}

TEST(host_store, random_puts_and_reads_stay_within_the_budget_and_evict_in_lru_order) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  const std::int64_t budget = 1000 + static_cast<std::int64_t>(rng() % 4000);
  host_store s(budget);
  // A reference: the last use of each hash held, and its size.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::size_t>> held;
  std::uint64_t clock = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::uint64_t k = rng() % 64;
    if (rng() % 3 == 0) {
      const bool hit = s.get(hash_of(k)) != nullptr;
      ASSERT_EQ(hit, held.contains(k)) << "step " << i;
      if (hit) held[k].first = ++clock;
      continue;
    }
    const std::size_t n = 1 + rng() % 400;
    held.erase(k);
    auto gone = s.put(record(k, n));
    held[k] = {++clock, n};
    std::int64_t bytes = 0;
    for (auto& [key, v] : held) bytes += static_cast<std::int64_t>(v.second);
    // The reference evicts the least recently used until the bytes fit.
    std::vector<std::uint64_t> want;
    while (bytes > budget) {
      auto oldest = std::min_element(held.begin(), held.end(), [](auto& a, auto& b) { return a.second.first < b.second.first; });
      want.push_back(oldest->first);
      bytes -= static_cast<std::int64_t>(oldest->second.second);
      held.erase(oldest);
    }
    ASSERT_EQ(gone.size(), want.size()) << "step " << i;
    for (std::size_t j = 0; j < gone.size(); ++j) EXPECT_EQ(gone[j].hash, hash_of(want[j])) << "step " << i;
    ASSERT_LE(s.bytes(), budget);
    ASSERT_EQ(s.bytes(), bytes);
    ASSERT_EQ(s.size(), held.size());
  }
}

}  // namespace
}  // namespace strata::kv
