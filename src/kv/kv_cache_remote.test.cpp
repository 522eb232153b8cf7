// The remote tier in the kv_cache_manager: after the blocks RAM (and the SSD) hold, a chain goes
// on through one order for other replicas; what comes back from its start counts, once.

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/kv_test_tokens.hpp"

namespace strata::kv {
namespace {

using test_tokens::iota_tokens;
constexpr std::int32_t k_block = 4;

cache_options remote_on() {
  cache_options o;
  o.block_tokens = k_block;
  o.prefix_cache = true;
  o.remote = true;
  o.ns.model = {42, 43};
  return o;
}

TEST(kv_cache_remote, a_miss_orders_every_full_block_after_the_last_token_from_other_replicas_once) {
  kv_cache_manager m(remote_on(), 64);
  const auto tokens = iota_tokens(4 * k_block + 2);  // 4 full blocks, the last token computed
  ASSERT_EQ(m.match(1, kv_format::f16, tokens), 0);
  ASSERT_TRUE(m.restore(1, tokens, 0));
  EXPECT_TRUE(m.restoring(1));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  EXPECT_TRUE(orders[0].remote);
  EXPECT_EQ(orders[0].hashes.size(), 4u);
  // Two of the four came back: the sequence holds them, computes from there, and no second
  // remote order is placed for it.
  auto r = m.restore_done(orders[0].order, 2);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->remote);
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->n_computed, 2 * k_block);
  EXPECT_EQ(r->restored, 2 * k_block);
  EXPECT_EQ(r->loaded.size(), 2u);
  EXPECT_EQ(m.blocks(1).size(), 2u);
  EXPECT_FALSE(m.restore(1, tokens, 2 * k_block));
  EXPECT_TRUE(m.take_restores().empty());
}

TEST(kv_cache_remote, fetched_blocks_are_found_in_ram_by_the_next_request) {
  kv_cache_manager m(remote_on(), 64);
  const auto tokens = iota_tokens(3 * k_block + 1);
  m.match(1, kv_format::f16, tokens);
  ASSERT_TRUE(m.restore(1, tokens, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  ASSERT_TRUE(m.restore_done(orders[0].order, 3));
  m.release(1, tokens, 3 * k_block);
  EXPECT_EQ(m.match(2, kv_format::f16, tokens), 3 * k_block);
}

TEST(kv_cache_remote, nothing_is_ordered_for_a_prompt_of_less_than_a_block_nor_with_the_prefix_cache_off) {
  kv_cache_manager m(remote_on(), 64);
  const auto short_prompt = iota_tokens(k_block);
  m.match(1, kv_format::f16, short_prompt);
  EXPECT_FALSE(m.restore(1, short_prompt, 0));
  cache_options off = remote_on();
  off.prefix_cache = false;
  kv_cache_manager n(off, 64);
  const auto tokens = iota_tokens(4 * k_block);
  n.match(1, kv_format::f16, tokens);
  EXPECT_FALSE(n.restore(1, tokens, 0));
  EXPECT_TRUE(n.take_restores().empty());
}

TEST(kv_cache_remote, a_chain_partly_in_ram_orders_only_the_blocks_after_it) {
  kv_cache_manager m(remote_on(), 64);
  const auto tokens = iota_tokens(5 * k_block + 1);
  m.match(1, kv_format::f16, tokens);
  ASSERT_TRUE(m.restore(1, tokens, 0));
  auto first = m.take_restores();
  ASSERT_TRUE(m.restore_done(first[0].order, 0));  // a miss: computed here
  ASSERT_EQ(m.cover(1, 2 * k_block), 2 * k_block);
  m.publish(1, tokens, 2 * k_block);
  m.release(1, tokens, 2 * k_block);
  ASSERT_EQ(m.match(2, kv_format::f16, tokens), 2 * k_block);
  ASSERT_TRUE(m.restore(2, tokens, 2 * k_block));
  auto second = m.take_restores();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].hashes.size(), 3u);
  EXPECT_TRUE(second[0].hashes[0] == first[0].hashes[2]);
}

}  // namespace
}  // namespace strata::kv
