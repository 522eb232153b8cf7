// The KV cache manager's block observer: which events a run of sequences produces.

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/kv_test_tokens.hpp"

namespace strata::kv {
namespace {

using test_tokens::iota_tokens;
using test_tokens::run;
using test_tokens::tokens_t;

struct recorder final : block_observer {
  std::vector<block_event> events;
  void on_block(block_event e) override { events.push_back(std::move(e)); }
  std::vector<block_event> take() { return std::exchange(events, {}); }
};

cache_options caching(std::int32_t block_tokens, bool ssd = false) {
  cache_options o;
  o.block_tokens = block_tokens;
  o.prefix_cache = true;
  o.ns.model = {42, 43};
  o.ssd = ssd;
  return o;
}


TEST(block_events, each_full_block_a_sequence_fills_is_reported_stored_in_ram_with_its_parent_and_tokens) {
  kv_cache_manager m(caching(4), 16);
  recorder r;
  m.observe(&r);
  run(m, 1, iota_tokens(10), 10);  // two full blocks, and a tail of two tokens (not reported)
  const auto ev = r.take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].what, block_event::kind::stored);
  EXPECT_EQ(ev[0].tier, kv_tier::ram);
  EXPECT_FALSE(ev[0].parent.has_value());
  EXPECT_EQ(ev[0].token_ids, (tokens_t{1, 2, 3, 4}));
  ASSERT_TRUE(ev[1].parent.has_value());
  EXPECT_EQ(*ev[1].parent, ev[0].hash);
  EXPECT_EQ(ev[1].token_ids, (tokens_t{5, 6, 7, 8}));
  // The same prompt again finds them cached: nothing new is stored.
  run(m, 2, iota_tokens(10), 10);
  EXPECT_TRUE(r.take().empty());
}

TEST(block_events, chain_hashes_names_the_blocks_the_cache_stores_so_a_router_can_compute_them) {
  cache_options o = caching(4);
  kv_cache_manager m(o, 16);
  recorder r;
  m.observe(&r);
  const auto tokens = iota_tokens(14);
  const cache_salt salt = make_cache_salt("", "tenant-a");
  m.match(1, kv_format::f16, tokens, salt);
  ASSERT_EQ(m.cover(1, 14), 14);
  m.publish(1, tokens, 14);
  cache_namespace ns = o.ns;
  ns.format = kv_format::f16;
  ns.block_tokens = 4;
  prefix_hasher hasher;
  const auto want = chain_hashes(hasher, ns, salt, tokens);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(r.events.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(r.events[i].hash, want[i]) << "block " << i;
  EXPECT_NE(chain_hashes(hasher, ns, {}, tokens)[0], want[0]) << "the salt is in every hash";
}

TEST(block_events, a_full_block_evicted_from_ram_is_reported_removed_once_the_saves_are_taken) {
  kv_cache_manager m(caching(4), 4);
  recorder r;
  m.observe(&r);
  run(m, 1, iota_tokens(8), 8);
  const auto stored = r.take();
  ASSERT_EQ(stored.size(), 2u);
  // Another prompt of four blocks takes every block of the pool: the cached ones are evicted.
  run(m, 2, iota_tokens(16, 100), 16);
  m.take_saves();
  std::vector<block_hash> removed;
  for (const auto& e : r.take())
    if (e.what == block_event::kind::removed) removed.push_back(e.hash);
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_TRUE(std::ranges::find(removed, stored[0].hash) != removed.end());
  EXPECT_TRUE(std::ranges::find(removed, stored[1].hash) != removed.end());
}

TEST(block_events, ssd_records_of_full_blocks_are_reported_on_the_ssd_tier_and_tails_are_not) {
  kv_cache_manager m(caching(4, true), 16);
  recorder r;
  m.observe(&r);
  const block_hash full{{1, 2, 3, 4}}, tail{{5, 6, 7, 8}};
  m.ssd_stored(full, {}, {});
  m.ssd_stored(tail, full, {9, 10});
  m.ssd_stored(full);  // known already: nothing new
  m.ssd_forgotten(tail);
  m.ssd_forgotten(full);
  const auto ev = r.take();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].what, block_event::kind::stored);
  EXPECT_EQ(ev[0].tier, kv_tier::ssd);
  EXPECT_EQ(ev[0].hash, full);
  EXPECT_EQ(ev[1].what, block_event::kind::removed);
  EXPECT_EQ(ev[1].hash, full);
}

TEST(block_events, without_an_observer_nothing_is_recorded_and_a_removed_observer_hears_nothing_more) {
  kv_cache_manager m(caching(4), 16);
  recorder r;
  m.observe(&r);
  m.observe(nullptr);
  run(m, 1, iota_tokens(8), 8);
  EXPECT_TRUE(r.events.empty());
  EXPECT_TRUE(m.take_saves().empty());
}

}  // namespace
}  // namespace strata::kv
