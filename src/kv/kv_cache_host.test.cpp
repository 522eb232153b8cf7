// The host tier in the kv_cache_manager: what the pool evicts is saved to it by value (never a
// block in use), and a chain that ends in the pool goes on through it before the SSD.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "src/kv/host_store.hpp"
#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/kv_test_tokens.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kv {
namespace {

using test_tokens::iota_tokens;
using test_tokens::run;
using test_tokens::tokens_t;
constexpr std::int32_t k_block = 4;

cache_options host_on(bool ssd = false, bool write_through = true) {
  cache_options o;
  o.block_tokens = k_block;
  o.prefix_cache = true;
  o.host = true;
  o.ssd = ssd;
  o.write_through = write_through;
  o.ns.model = {42, 43};
  return o;
}

/// n f16 blocks of which none stays cached once released: every hashed block leaves at once.
pool_config uncached(std::int32_t n) {
  pool_config c;
  c.space.capacity = {n, 0, 0};
  c.block_bytes = {1, 1, 1};
  c.budget = n;
  c.cached_budget = 0;
  return c;
}


TEST(kv_cache_host, evicted_blocks_are_saved_to_the_host_tier_and_blocks_in_use_never_are) {
  kv_cache_manager m(host_on(), 6);
  const auto a = iota_tokens(4 * k_block + 1);  // 4 full blocks (the last token is always computed)
  ASSERT_EQ(m.match(1, kv_format::f16, a), 0);
  ASSERT_EQ(m.cover(1, 4 * k_block), 4 * k_block);
  m.publish(1, a, 4 * k_block);
  EXPECT_TRUE(m.take_saves().empty()) << "blocks in use are never copied out";
  m.release(1, a, 4 * k_block);
  EXPECT_TRUE(m.take_saves().empty()) << "cached in the pool: nothing leaves it yet";

  // Six blocks for another sequence: the four cached ones are evicted, and saved.
  const auto b = iota_tokens(6 * k_block, 1000);
  ASSERT_EQ(m.match(2, kv_format::f16, b), 0);
  ASSERT_EQ(m.cover(2, 6 * k_block), 6 * k_block);
  const auto saves = m.take_saves();
  ASSERT_EQ(saves.size(), 4u);
  const auto blocks = m.blocks(2);
  for (const auto& sv : saves) {
    EXPECT_TRUE(sv.host);
    EXPECT_FALSE(sv.spill) << "no SSD tier";
    EXPECT_TRUE(sv.token_ids.empty());
    // Handed to sequence 2, which writes it only after the step copied it out.
    EXPECT_NE(std::find(blocks.begin(), blocks.end(), sv.block), blocks.end());
    EXPECT_FALSE(m.on_host(sv.hash)) << "not there before its copy is";
    m.host_stored(sv.hash);
    EXPECT_TRUE(m.on_host(sv.hash));
  }
  EXPECT_TRUE(m.take_saves().empty()) << "each block is saved once";
  m.release(2, b, 0);

  // The pool lacks `a` now: its chain goes on through the host tier, in one order.
  ASSERT_EQ(m.match(3, kv_format::f16, a), 0);
  ASSERT_TRUE(m.restore(3, a, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_TRUE(orders[0].host);
  EXPECT_FALSE(orders[0].remote);
  ASSERT_EQ(orders[0].hashes.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(orders[0].hashes[i], saves[i].hash) << "chain order, block " << i;
  const auto r = m.restore_done(orders[0].order, 4);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->host);
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(r->restored, 4 * k_block);
  EXPECT_EQ(r->n_computed, 4 * k_block);
  EXPECT_EQ(r->loaded.size(), 4u);
  for (const auto& sv : saves) EXPECT_FALSE(m.on_host(sv.hash)) << "handed over: the tier no longer holds it";
  m.release(3, a, 4 * k_block);
  EXPECT_EQ(m.match(4, kv_format::f16, a), 4 * k_block) << "restored blocks are the pool's again";
}

/// Runs `a` through a tiered cache with the host tier, then evicts it; returns its 4 block hashes.
std::vector<block_hash> evicted_chain(kv_cache_manager& m, const tokens_t& a) {
  run(m, 1, a, 4 * k_block);
  std::vector<block_hash> hashes;
  for (const auto& sv : m.take_saves()) {
    EXPECT_FALSE(sv.host) << "write-through: to the SSD as filled";
    m.ssd_stored(sv.hash);
    hashes.push_back(sv.hash);
  }
  const auto b = iota_tokens(6 * k_block, 1000);
  m.match(2, kv_format::f16, b);
  m.cover(2, 6 * k_block);
  for (const auto& sv : m.take_saves()) {
    EXPECT_TRUE(sv.host);
    EXPECT_FALSE(sv.spill) << "on the SSD already";
    m.host_stored(sv.hash);
  }
  m.release(2, b, 0);
  return hashes;
}

TEST(kv_cache_host, a_chain_goes_on_through_the_host_tier_first_then_the_ssd) {
  kv_cache_manager m(host_on(true), 6);
  const auto a = iota_tokens(4 * k_block + 1);
  const auto h = evicted_chain(m, a);
  ASSERT_EQ(h.size(), 4u);
  // The host tier let the last two go (past its budget): they are on the SSD only.
  m.host_dropped(h[2]);
  m.host_dropped(h[3]);
  ASSERT_EQ(m.match(3, kv_format::f16, a), 0);
  ASSERT_TRUE(m.restore(3, a, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_TRUE(orders[0].host);
  EXPECT_EQ(orders[0].hashes, (std::vector<block_hash>{h[0], h[1]}));
  auto r = m.restore_done(orders[0].order, 2);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(r->n_computed, 2 * k_block);
  // The planner goes on from there: the SSD's order.
  ASSERT_TRUE(m.restore(3, a, r->n_computed));
  orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_FALSE(orders[0].host);
  EXPECT_EQ(orders[0].hashes, (std::vector<block_hash>{h[2], h[3]}));
  r = m.restore_done(orders[0].order, 2);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->host);
  EXPECT_EQ(r->n_computed, 4 * k_block);
  EXPECT_EQ(r->restored, 2 * k_block);
  EXPECT_EQ(m.blocks(3).size(), 4u);
}

TEST(kv_cache_host, a_block_the_host_tier_no_longer_holds_is_forgotten_and_read_from_the_ssd) {
  kv_cache_manager m(host_on(true), 6);
  const auto a = iota_tokens(4 * k_block + 1);
  const auto h = evicted_chain(m, a);
  ASSERT_EQ(m.match(3, kv_format::f16, a), 0);
  ASSERT_TRUE(m.restore(3, a, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_EQ(orders[0].hashes.size(), 4u);
  // Only the first came back (the tier evicted the second meanwhile, its notice on the way).
  auto r = m.restore_done(orders[0].order, 1);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->n_computed, k_block);
  // The tier handed over what it held and lacked the second: none of the four is there now.
  for (const auto& x : h) EXPECT_FALSE(m.on_host(x));
  ASSERT_TRUE(m.restore(3, a, k_block));
  orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_FALSE(orders[0].host);
  EXPECT_EQ(orders[0].hashes, (std::vector<block_hash>{h[1], h[2], h[3]}));
}

TEST(kv_cache_host, without_write_through_evicted_blocks_reach_the_ssd_through_the_host_tier) {
  kv_cache_manager m(host_on(true, false), 6);
  const auto a = iota_tokens(4 * k_block + 1);
  run(m, 1, a, 4 * k_block);
  EXPECT_TRUE(m.take_saves().empty()) << "nothing is written before it leaves the pool";
  const auto b = iota_tokens(6 * k_block, 1000);
  m.match(2, kv_format::f16, b);
  m.cover(2, 6 * k_block);
  const auto saves = m.take_saves();
  ASSERT_EQ(saves.size(), 4u);
  for (const auto& sv : saves) {
    EXPECT_TRUE(sv.host) << "the host tier takes it, not the SSD";
    EXPECT_TRUE(sv.spill) << "the SSD lacks it: the host tier passes it on when it evicts it";
    m.host_stored(sv.hash);
  }
  // The host tier evicted them all, passing them on; the SSD wrote the first so far.
  for (const auto& sv : saves) m.host_dropped(sv.hash);
  m.ssd_stored(saves[0].hash);
  m.release(2, b, 0);
  ASSERT_EQ(m.match(3, kv_format::f16, a), 0);
  ASSERT_TRUE(m.restore(3, a, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_FALSE(orders[0].host) << "the host tier holds none of them now: the SSD has the first";
  EXPECT_EQ(orders[0].hashes, std::vector<block_hash>{saves[0].hash});
  ASSERT_TRUE(m.restore_done(orders[0].order, 1));
  m.release(3, a, k_block);
  m.match(4, kv_format::f16, b);
  m.cover(4, 6 * k_block);
  // Evicted again: saved to the host tier again, and not spilled (on the SSD already).
  const auto again = m.take_saves();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].hash, saves[0].hash);
  EXPECT_TRUE(again[0].host);
  EXPECT_FALSE(again[0].spill);
}

TEST(kv_cache_host, a_tail_left_with_no_room_in_the_pool_comes_back_from_the_host_tier_with_the_tokens_it_shares) {
  kv_cache_manager m(host_on(), uncached(12));
  const auto a = iota_tokens(4 * k_block + 2);
  run(m, 1, a, 4 * k_block + 2);  // 4 full blocks and a tail of 2 tokens, none cached in the pool
  const auto saves = m.take_saves();
  ASSERT_EQ(saves.size(), 5u);
  std::size_t tails = 0;
  for (const auto& sv : saves) {
    EXPECT_TRUE(sv.host);
    if (!sv.token_ids.empty()) {
      ++tails;
      EXPECT_EQ(sv.token_ids, (tokens_t{17, 18}));
    }
    m.host_stored(sv.hash);
  }
  EXPECT_EQ(tails, 1u);
  // Shares the 4 blocks and both tokens of the tail, then parts.
  tokens_t p(a.begin(), a.end());
  p.insert(p.end(), {500, 501, 502});
  ASSERT_EQ(m.match(2, kv_format::f16, p), 0);
  ASSERT_TRUE(m.restore(2, p, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_TRUE(orders[0].host);
  ASSERT_EQ(orders[0].hashes.size(), 5u);
  const auto r = m.restore_done(orders[0].order, 5);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->n_computed, 4 * k_block + 2);
  EXPECT_EQ(r->restored, 4 * k_block + 2);
  EXPECT_EQ(r->loaded.size(), 5u);
}

TEST(kv_cache_host, turning_the_prefix_cache_off_forgets_the_host_tier_and_saves_nothing_more) {
  kv_cache_manager m(host_on(), uncached(8));
  const auto a = iota_tokens(2 * k_block + 1);
  run(m, 1, a, 2 * k_block);
  const auto saves = m.take_saves();
  ASSERT_EQ(saves.size(), 2u);
  for (const auto& sv : saves) m.host_stored(sv.hash);
  m.set_mode(false, false);
  EXPECT_FALSE(m.on_host(saves[0].hash));
  EXPECT_EQ(m.host_count(), 0u);
  run(m, 2, a, 2 * k_block);
  EXPECT_TRUE(m.take_saves().empty());
}

// --- the whole chain, against the pages' contents -------------------------------------------

/// What position p of a sequence holds in every layer: a digest of its tokens up to p, as KV is
/// a function of the whole prefix.
std::uint64_t digest(const tokens_t& t, std::size_t p) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i <= p; ++i) h = (h ^ static_cast<std::uint64_t>(t[i])) * 1099511628211ull;
  return h;
}

TEST(kv_cache_host, random_prompts_through_a_small_pool_and_host_tier_find_exactly_the_kv_they_would_compute) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  constexpr std::int32_t n_blocks = 24;
  // The pool's pages: per block, per slot, the digest written there (0: never written).
  std::vector<std::vector<std::uint64_t>> pages(n_blocks, std::vector<std::uint64_t>(k_block, 0));
  kv_cache_manager m(host_on(), uncached(n_blocks));
  // The host tier keeps the frozen copies within 20 blocks' bytes.
  const std::size_t block_bytes = k_block * sizeof(std::uint64_t);
  host_store tier(static_cast<std::int64_t>(20 * block_bytes));
  std::vector<std::pair<std::int32_t, std::vector<std::byte>>> loads;

  // One step's copying, in the layers' order: saves out, loads in, copies.
  auto step = [&] {
    for (auto& sv : m.take_saves()) {
      ASSERT_TRUE(sv.host);
      host_record r{sv.hash, sv.parent, sv.format, std::move(sv.token_ids), sv.spill, std::vector<std::byte>(block_bytes)};
      std::memcpy(r.bytes.data(), pages[static_cast<std::size_t>(sv.block)].data(), block_bytes);
      m.host_stored(sv.hash);
      for (auto& gone : tier.put(std::move(r))) m.host_dropped(gone.hash);
    }
    for (auto& [b, bytes] : std::exchange(loads, {})) std::memcpy(pages[static_cast<std::size_t>(b)].data(), bytes.data(), block_bytes);
    for (const auto& c : m.take_copies()) pages[static_cast<std::size_t>(c.to)] = pages[static_cast<std::size_t>(c.from)];
  };

  std::vector<tokens_t> bases;
  for (int i = 0; i < 5; ++i) bases.push_back(iota_tokens(8 + static_cast<int>(rng() % 40), static_cast<std::int32_t>(rng() % 50)));
  std::uint64_t host_tokens = 0;
  for (std::uint64_t id = 1; id <= 400; ++id) {
    tokens_t t = bases[rng() % bases.size()];
    t.resize(1 + rng() % t.size());
    for (int k = static_cast<int>(rng() % 10); k > 0; --k) t.push_back(static_cast<std::int32_t>(rng() % 60));
    if (t.size() > static_cast<std::size_t>(n_blocks - 2) * k_block) t.resize(static_cast<std::size_t>(n_blocks - 2) * k_block);
    std::int32_t n = m.match(id, kv_format::f16, t);
    step();
    while (m.restore(id, t, n)) {
      auto orders = m.take_restores();
      ASSERT_EQ(orders.size(), 1u);
      ASSERT_TRUE(orders[0].host) << "no other tier";
      step();  // the step carrying the order's neighbours' saves runs before the answer
      // The tier hands over every block of the order it holds (as the host_tier actor does); the
      // first ones up to a miss count.
      std::vector<std::vector<std::byte>> got;
      bool missed = false;
      for (const auto& h : orders[0].hashes) {
        auto r = tier.take(h);
        missed = missed || !r;
        if (!missed) got.push_back(std::move(r->bytes));
      }
      auto r = m.restore_done(orders[0].order, static_cast<std::int32_t>(got.size()));
      ASSERT_TRUE(r);
      ASSERT_LE(r->loaded.size(), got.size());
      for (std::size_t i = 0; i < r->loaded.size(); ++i) loads.emplace_back(r->loaded[i], std::move(got[i]));
      host_tokens += static_cast<std::uint64_t>(r->restored);
      n = r->n_computed;
    }
    const auto len = static_cast<std::int32_t>(t.size());
    ASSERT_EQ(m.cover(id, len), len) << "id " << id;
    step();
    // Whatever the sequence took holds exactly what computing it would write.
    const auto blocks = m.blocks(id);
    for (std::int32_t p = 0; p < n; ++p)
      ASSERT_EQ(pages[static_cast<std::size_t>(blocks[static_cast<std::size_t>(p / k_block)])][static_cast<std::size_t>(p % k_block)],
                digest(t, static_cast<std::size_t>(p)))
          << "id " << id << " position " << p << " of " << n << " reused";
    for (std::int32_t p = n; p < len; ++p)
      pages[static_cast<std::size_t>(blocks[static_cast<std::size_t>(p / k_block)])][static_cast<std::size_t>(p % k_block)] =
          digest(t, static_cast<std::size_t>(p));
    m.publish(id, t, len);
    m.release(id, t, len);
    ASSERT_EQ(m.pool().in_use(), 0) << "id " << id;
    ASSERT_LE(tier.bytes(), tier.budget());
  }
  EXPECT_GT(host_tokens, 0u) << "nothing ever came back from the host tier";
}

}  // namespace
}  // namespace strata::kv
