// Frozen boundary snapshots and the SSD tier, in the kv_cache_manager: what a tiered cache sends to
// the disk, and how a chain found there after a restart resumes at its snapshot, or not at all
// when the snapshot does not come back.

#include <numeric>

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"
#include "src/kv/kv_test_tokens.hpp"
#include "src/kv/snapshot_index.hpp"

namespace strata::kv {
namespace {

using test_tokens::iota_tokens;
using test_tokens::tokens_t;
constexpr std::int32_t k_block = 4;

cache_options tiered(bool ssd) {
  cache_options o;
  o.block_tokens = k_block;
  o.prefix_cache = true;
  o.ssd = ssd;
  o.ns.model = {42, 43};
  o.snapshots = {.on = true, .block_tokens = k_block, .every = 0};
  return o;
}

state_snapshot two_layers() {
  return state_snapshot{{std::vector<std::byte>(24, std::byte{7}), {}, std::vector<std::byte>(5, std::byte{9})}};
}

/// What a first server wrote: the hashes of the blocks saved and the snapshot saves.
struct written {
  std::vector<block_hash> blocks;
  std::vector<kv_cache_manager::snapshot_save> snapshots;
};

/// Computes `tokens`, snapshots at boundary `end`, and returns what went to the SSD.
written first_server(const tokens_t& tokens, std::int32_t end, bool ssd = true) {
  kv_cache_manager m(tiered(ssd), 64);
  m.match(1, kv_format::f16, tokens);
  const auto n = static_cast<std::int32_t>(tokens.size());
  EXPECT_EQ(m.cover(1, n), n);
  m.publish(1, tokens, n);
  m.add_snapshot(1, tokens, end, two_layers());
  written w;
  for (const auto& s : m.take_saves()) w.blocks.push_back(s.hash);
  w.snapshots = m.take_snapshot_saves();
  m.release(1, tokens, n);
  return w;
}

TEST(snapshot_encoding, a_snapshot_round_trips_and_truncated_or_padded_bytes_are_refused) {
  const state_snapshot s = two_layers();
  const auto bytes = encode_snapshot(s);
  auto back = decode_snapshot(bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->layers, s.layers);
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, bytes.size() - 1}) {
    EXPECT_FALSE(decode_snapshot(std::span(bytes).first(cut))) << cut;
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(decode_snapshot(longer));
  auto huge = bytes;
  huge[0] = std::byte{0xff};  // a layer count the bytes cannot hold
  EXPECT_FALSE(decode_snapshot(huge));
}

TEST(kv_cache_snapshots_ssd, a_tiered_cache_sends_each_snapshot_to_the_ssd_and_a_hot_one_sends_none) {
  const tokens_t t = iota_tokens(13);
  const written w = first_server(t, 12);
  ASSERT_EQ(w.blocks.size(), 3u);
  ASSERT_EQ(w.snapshots.size(), 1u);
  EXPECT_TRUE(w.snapshots[0].hash == w.blocks[2]);
  EXPECT_TRUE(w.snapshots[0].parent == w.blocks[1]);
  EXPECT_EQ(w.snapshots[0].tokens, 12);
  auto back = decode_snapshot(w.snapshots[0].payload);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->layers, two_layers().layers);

  const written hot = first_server(t, 12, false);
  EXPECT_TRUE(hot.blocks.empty());
  EXPECT_TRUE(hot.snapshots.empty());
}

TEST(kv_cache_snapshots_ssd, after_a_restart_a_longer_prompt_resumes_at_the_snapshot_read_back_from_the_ssd) {
  const tokens_t first = iota_tokens(13);
  const written w = first_server(first, 12);
  kv_cache_manager m(tiered(true), 64);  // the restart: the SSD's catalog only
  for (const auto& h : w.blocks) m.ssd_stored(h);
  m.ssd_snapshot_stored(w.snapshots[0].hash);

  const tokens_t longer = iota_tokens(30);
  EXPECT_EQ(m.match(2, kv_format::f16, longer), 0);
  ASSERT_TRUE(m.restore(2, longer, 0));
  auto orders = m.take_restores();
  ASSERT_EQ(orders.size(), 1u);
  // The three blocks, then the snapshot at the end of the third.
  ASSERT_EQ(orders[0].hashes.size(), 4u);
  EXPECT_TRUE(orders[0].hashes[2] == w.blocks[2]);
  EXPECT_TRUE(orders[0].hashes[3] == snapshot_key(w.blocks[2]));
  EXPECT_TRUE(m.restore_wants_snapshot(orders[0].order));

  auto r = m.restore_done(orders[0].order, 3, decode_snapshot(w.snapshots[0].payload));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->n_computed, 12);
  EXPECT_EQ(r->restored, 12);
  EXPECT_EQ(r->loaded.size(), 3u);
  auto resume = m.take_resume(2);
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->layers, two_layers().layers);
  EXPECT_EQ(m.snapshot_figures().restores, 1u);
}

TEST(kv_cache_snapshots_ssd, blocks_read_back_without_their_snapshot_are_no_resume_point) {
  const tokens_t first = iota_tokens(13);
  const written w = first_server(first, 12);
  const tokens_t longer = iota_tokens(30);
  for (bool all_blocks : {true, false}) {
    kv_cache_manager m(tiered(true), 64);
    for (const auto& h : w.blocks) m.ssd_stored(h);
    m.ssd_snapshot_stored(w.snapshots[0].hash);
    m.match(2, kv_format::f16, longer);
    ASSERT_TRUE(m.restore(2, longer, 0));
    auto orders = m.take_restores();
    ASSERT_EQ(orders.size(), 1u);
    // The snapshot is corrupt (nullopt), or it came back but a block did not.
    auto r = all_blocks ? m.restore_done(orders[0].order, 3, std::nullopt)
                        : m.restore_done(orders[0].order, 2, decode_snapshot(w.snapshots[0].payload));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->n_computed, 0) << all_blocks;
    EXPECT_TRUE(r->loaded.empty());
    EXPECT_FALSE(m.take_resume(2));
    EXPECT_EQ(m.pool().in_use(), 0) << "the ordered blocks went back";
    m.release(2, longer, 0);
  }
}

TEST(kv_cache_snapshots_ssd, a_chain_on_the_ssd_without_any_snapshot_orders_nothing) {
  const written w = first_server(iota_tokens(13), 12);
  kv_cache_manager m(tiered(true), 64);
  for (const auto& h : w.blocks) m.ssd_stored(h);
  const tokens_t longer = iota_tokens(30);
  m.match(2, kv_format::f16, longer);
  EXPECT_FALSE(m.restore(2, longer, 0));
  EXPECT_TRUE(m.take_restores().empty());
}

TEST(kv_cache_snapshots_ssd, the_answers_about_a_snapshot_record_leave_the_blocks_alone) {
  const written w = first_server(iota_tokens(13), 12);
  kv_cache_manager m(tiered(true), 64);
  for (const auto& h : w.blocks) m.ssd_stored(h);
  m.ssd_snapshot_stored(w.snapshots[0].hash);
  m.ssd_forgotten(snapshot_key(w.snapshots[0].hash));  // its record was found corrupt
  EXPECT_FALSE(m.snapshot_on_ssd(w.snapshots[0].hash));
  EXPECT_TRUE(m.on_ssd(w.blocks[2]));
}

}  // namespace
}  // namespace strata::kv
