// kv_cache_manager at run time: the admin API switches cache.mode and clears the RAM tier.
#include <numeric>

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"

namespace strata::kv {
namespace {

using tokens_t = std::vector<std::int32_t>;

cache_options hot(std::int32_t block_tokens) {
  cache_options o;
  o.block_tokens = block_tokens;
  o.prefix_cache = true;
  o.ns.model = {7, 8};
  return o;
}

/// Runs a sequence of tokens 1..n through the cache, computing all but the last; returns what it
/// found cached.
std::int32_t computed_once(kv_cache_manager& m, std::uint64_t id, int n) {
  tokens_t t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), 1);
  const std::int32_t found = m.match(id, kv_format::f16, t);
  m.cover(id, n - 1);
  m.publish(id, t, n - 1);
  m.release(id, t, n - 1);
  m.take_copies();
  return found;
}

TEST(kv_cache_modes, clearing_the_ram_tier_evicts_every_cached_block_and_the_next_run_finds_nothing) {
  kv_cache_manager m(hot(4), 64);
  EXPECT_EQ(computed_once(m, 1, 17), 0);
  ASSERT_GT(m.pool().cached_count(), 0);
  EXPECT_GT(computed_once(m, 2, 17), 0) << "a repeat hits before the clear";
  const std::int64_t cached = m.pool().bytes_cached();
  EXPECT_EQ(m.clear_cached(), cached);
  EXPECT_EQ(m.pool().cached_count(), 0);
  EXPECT_EQ(m.pool().bytes_cached(), 0);
  EXPECT_EQ(computed_once(m, 3, 17), 0) << "nothing is left to reuse";
}

TEST(kv_cache_modes, clearing_keeps_the_blocks_a_running_sequence_holds) {
  kv_cache_manager m(hot(4), 64);
  computed_once(m, 1, 17);
  tokens_t t(9);
  std::iota(t.begin(), t.end(), 1);
  ASSERT_EQ(m.match(2, kv_format::f16, t), 8);
  const std::int32_t held = m.pool().in_use();
  m.clear_cached();
  EXPECT_EQ(m.pool().in_use(), held);
  EXPECT_EQ(m.blocks(2).size(), 2u);
}

TEST(kv_cache_modes, switching_the_prefix_cache_off_forgets_everything_and_on_again_caches_anew) {
  kv_cache_manager m(hot(4), 64);
  computed_once(m, 1, 17);
  m.set_mode(false, false);
  EXPECT_EQ(m.pool().cached_count(), 0);
  EXPECT_EQ(computed_once(m, 2, 17), 0) << "off: no lookups";
  EXPECT_EQ(m.pool().cached_count(), 0) << "off: nothing is kept";
  m.set_mode(true, false);
  EXPECT_EQ(computed_once(m, 3, 17), 0) << "what was computed while off was not kept";
  EXPECT_EQ(computed_once(m, 4, 17), 16) << "on again: the next repeat hits";
}

}  // namespace
}  // namespace strata::kv
