// The KV cache manager's block observer: which events a run of sequences produces.

#include <algorithm>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/kv_test_tokens.hpp"
#include "tests/support/test_seed.hpp"

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

// The host tier: blocks the pool evicts reach it by value; its events come from the manager's
// host_stored / host_dropped and from the restore orders it answers.

constexpr std::int32_t k_host_block = 4;

cache_options host_caching() {
  cache_options o = caching(k_host_block);
  o.host = true;
  return o;
}

/// n random tokens in [1, 30000).
tokens_t random_tokens(std::mt19937& rng, int n) {
  std::uniform_int_distribution<std::int32_t> d(1, 29999);
  tokens_t t(static_cast<std::size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

/// The events of one kind and tier, in order.
std::vector<block_event> only(const std::vector<block_event>& ev, block_event::kind what, kv_tier tier) {
  std::vector<block_event> out;
  for (const auto& e : ev)
    if (e.what == what && e.tier == tier) out.push_back(e);
  return out;
}

/// Runs `a` (its full blocks) through m, then lets sequence 2 take the whole pool of 6 so that
/// they are evicted; returns their saves (to the host tier), before any is reported stored.
std::vector<save_item> evict_to_host(kv_cache_manager& m, const tokens_t& a, std::mt19937& rng) {
  run(m, 1, a, static_cast<std::int32_t>(a.size()) - 1);
  const auto b = random_tokens(rng, 6 * k_host_block);
  m.match(2, kv_format::f16, b);
  EXPECT_EQ(m.cover(2, 6 * k_host_block), 6 * k_host_block);
  auto saves = m.take_saves();
  m.release(2, b, 0);
  return saves;
}

/// evict_to_host, then the tier reports every block stored; the recorder is emptied after.
std::vector<save_item> stored_in_host(kv_cache_manager& m, recorder& r, const tokens_t& a, std::mt19937& rng) {
  auto saves = evict_to_host(m, a, rng);
  for (const auto& sv : saves) m.host_stored(sv.hash);
  r.take();
  return saves;
}

TEST(block_events, host_tier_blocks_are_reported_stored_once_it_holds_them_with_parent_format_and_tokens) {
  std::mt19937 rng(test_seed());
  kv_cache_manager m(host_caching(), 6);
  recorder r;
  m.observe(&r);
  const auto a = random_tokens(rng, 4 * k_host_block + 1);
  const auto saves = evict_to_host(m, a, rng);
  ASSERT_EQ(saves.size(), 4u);
  auto ev = r.take();
  const auto ram = only(ev, block_event::kind::stored, kv_tier::ram);
  ASSERT_EQ(ram.size(), 4u);
  EXPECT_EQ(only(ev, block_event::kind::removed, kv_tier::ram).size(), 4u) << "evicted from the pool";
  EXPECT_TRUE(only(ev, block_event::kind::stored, kv_tier::host).empty()) << "not before the tier holds them";

  for (const auto& sv : saves) m.host_stored(sv.hash);
  for (const auto& sv : saves) m.host_stored(sv.hash);  // told twice: nothing new
  ev = r.take();
  ASSERT_EQ(ev.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const block_event& e = ev[i];
    EXPECT_EQ(e.what, block_event::kind::stored);
    EXPECT_EQ(e.tier, kv_tier::host);
    EXPECT_EQ(e.hash, saves[i].hash);
    EXPECT_EQ(e.format, kv_format::f16);
    // The same block, the same chain and tokens as when the pool stored it.
    const auto want = std::find_if(ram.begin(), ram.end(), [&](const block_event& x) { return x.hash == e.hash; });
    ASSERT_NE(want, ram.end()) << "block " << i;
    EXPECT_EQ(e.parent, want->parent) << "block " << i;
    EXPECT_EQ(e.token_ids, want->token_ids) << "block " << i;
  }
}

TEST(block_events, a_host_tier_block_is_reported_removed_once_as_it_drops_it_or_hands_it_over) {
  std::mt19937 rng(test_seed());
  kv_cache_manager m(host_caching(), 6);
  recorder r;
  m.observe(&r);
  const auto a = random_tokens(rng, 4 * k_host_block + 1);
  const auto saves = stored_in_host(m, r, a, rng);
  ASSERT_EQ(saves.size(), 4u);

  // The tier evicted the last block past its budget; its notice comes twice.
  m.host_dropped(saves[3].hash);
  m.host_dropped(saves[3].hash);
  auto ev = r.take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].what, block_event::kind::removed);
  EXPECT_EQ(ev[0].tier, kv_tier::host);
  EXPECT_EQ(ev[0].hash, saves[3].hash);

  // A restore order takes the other three out of the tier and back into the pool: removed from
  // the host tier before they are stored in RAM.
  ASSERT_EQ(m.match(3, kv_format::f16, a), 0);
  ASSERT_TRUE(m.restore(3, a, 0));
  const auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_TRUE(orders[0].host);
  ASSERT_EQ(orders[0].hashes.size(), 3u);
  ASSERT_TRUE(m.restore_done(orders[0].order, 3));
  ev = r.take();
  ASSERT_EQ(ev.size(), 6u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ev[i].what, block_event::kind::removed);
    EXPECT_EQ(ev[i].tier, kv_tier::host);
    EXPECT_EQ(ev[i].hash, saves[i].hash);
    EXPECT_EQ(ev[3 + i].what, block_event::kind::stored);
    EXPECT_EQ(ev[3 + i].tier, kv_tier::ram);
    EXPECT_EQ(ev[3 + i].hash, saves[i].hash);
  }
  // Late notices of blocks it no longer holds say nothing.
  for (const auto& sv : saves) m.host_dropped(sv.hash);
  EXPECT_TRUE(r.take().empty());
}

TEST(block_events, turning_the_prefix_cache_off_reports_every_host_tier_block_removed_and_the_tier_notices_add_nothing) {
  std::mt19937 rng(test_seed());
  kv_cache_manager m(host_caching(), 6);
  recorder r;
  m.observe(&r);
  const auto saves = stored_in_host(m, r, random_tokens(rng, 4 * k_host_block + 1), rng);
  ASSERT_EQ(saves.size(), 4u);
  m.set_mode(false, false);
  auto removed = only(r.take(), block_event::kind::removed, kv_tier::host);
  ASSERT_EQ(removed.size(), 4u);
  for (const auto& sv : saves) {
    EXPECT_TRUE(std::ranges::any_of(removed, [&](const block_event& e) { return e.hash == sv.hash; }));
    EXPECT_FALSE(m.on_host(sv.hash));
  }
  // The tier's clear answers with a notice per block: already said.
  for (const auto& sv : saves) m.host_dropped(sv.hash);
  EXPECT_TRUE(only(r.take(), block_event::kind::removed, kv_tier::host).empty());
}

TEST(block_events, tails_in_the_host_tier_are_not_reported_and_a_block_can_be_in_ram_and_the_host_tier_at_once) {
  std::mt19937 rng(test_seed());
  kv_cache_manager m(host_caching(), 6);
  recorder r;
  m.observe(&r);
  // Two full blocks and a tail of three tokens (computed up to the last known token).
  const auto a = random_tokens(rng, 2 * k_host_block + 4);
  const auto saves = evict_to_host(m, a, rng);
  ASSERT_EQ(saves.size(), 3u);
  for (const auto& sv : saves) m.host_stored(sv.hash);
  const auto stored = only(r.take(), block_event::kind::stored, kv_tier::host);
  ASSERT_EQ(stored.size(), 2u) << "the tail is not reported";
  for (const auto& e : stored) {
    EXPECT_TRUE(std::ranges::any_of(saves, [&](const save_item& sv) { return sv.hash == e.hash && sv.token_ids.empty(); }));
  }
  for (const auto& sv : saves) m.host_dropped(sv.hash);
  EXPECT_EQ(only(r.take(), block_event::kind::removed, kv_tier::host).size(), 2u);

  // The first block computed again while the host tier holds it: each tier reports its own.
  kv_cache_manager m2(host_caching(), 6);
  m2.observe(&r);
  const auto c = random_tokens(rng, k_host_block + 1);
  const auto s2 = evict_to_host(m2, c, rng);
  ASSERT_EQ(s2.size(), 1u);
  m2.host_stored(s2[0].hash);
  r.take();
  run(m2, 5, c, k_host_block);  // the pool holds it again, computed (no restore asked for)
  auto ev = r.take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].tier, kv_tier::ram);
  EXPECT_EQ(ev[0].hash, s2[0].hash);
  EXPECT_TRUE(m2.on_host(s2[0].hash));
  m2.host_dropped(s2[0].hash);
  ev = r.take();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].what, block_event::kind::removed);
  EXPECT_EQ(ev[0].tier, kv_tier::host);
}

}  // namespace
}  // namespace strata::kv
