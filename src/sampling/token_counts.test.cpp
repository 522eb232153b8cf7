#include "src/sampling/token_counts.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/support/test_seed.hpp"

namespace strata::sampling {
namespace {

TEST(token_counts, matches_a_map_under_random_adds_and_removes) {
  std::mt19937 rng(test_seed());
  for (int round = 0; round < 20; ++round) {
    token_counts c;
    std::map<std::int32_t, std::int32_t> ref;
    // Few distinct ids and many operations: long probe runs, frequent deletions and regrowth.
    const std::int32_t ids = 1 + static_cast<std::int32_t>(rng() % 300);
    for (int op = 0; op < 5000; ++op) {
      const auto t = static_cast<std::int32_t>(rng() % static_cast<unsigned>(ids)) * (round % 2 ? 1 : 4096);
      if (rng() % 3 == 0) {
        c.remove(t);
        if (auto it = ref.find(t); it != ref.end() && --it->second == 0) ref.erase(it);
      } else {
        c.add(t);
        ++ref[t];
      }
      ASSERT_EQ(c.count(t), ref.contains(t) ? ref[t] : 0);
    }
    ASSERT_EQ(c.size(), ref.size());
    std::map<std::int32_t, std::int32_t> seen;
    c.for_each([&](std::int32_t t, std::int32_t n) { seen[t] = n; });
    EXPECT_EQ(seen, ref);
    for (const auto& [t, n] : ref) EXPECT_EQ(c.count(t), n);
  }
}

TEST(token_counts, ignores_negative_ids_and_absent_removals) {
  token_counts c;
  c.add(-1);
  c.remove(5);
  EXPECT_EQ(c.size(), 0u);
  c.add(5);
  c.add(5);
  c.remove(5);
  EXPECT_EQ(c.count(5), 1);
  c.clear();
  EXPECT_EQ(c.count(5), 0);
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace strata::sampling
