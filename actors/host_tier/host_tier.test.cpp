#include "actors/host_tier/host_tier.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "actors/runtime/actor_system.hpp"
#include "io/ssd/wire_record.hpp"
#include "tests/support/probe_actor.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::host_tier {
namespace {

/// The tier on a manual actor system, probes standing in for the scheduler and the SSD store.
struct tier_on_manual_system {
  actors::actor_system system{{.threads = 0}};
  test_support::probe_log<sched::scheduler_inbox> sched_log = test_support::make_probe_log<sched::scheduler_inbox>();
  test_support::probe_log<ssd::store_inbox> ssd_log = test_support::make_probe_log<ssd::store_inbox>();
  address actor;

  tier_on_manual_system(std::int64_t budget, bool with_ssd, tier_metrics m = {}) {
    auto sched = system.spawn<test_support::probe_actor<sched::scheduler_inbox>>("scheduler", actors::supervision::stop_system,
                                                                                 sched_log);
    std::optional<ssd::store_address> ssd;
    if (with_ssd) ssd = system.spawn<test_support::probe_actor<ssd::store_inbox>>("ssd", actors::supervision::stop_system, ssd_log);
    actor = system.spawn<host_tier>("host-tier", actors::supervision::stop_system, budget, ssd, 5, 16, m);
    actor.tell(attach{sched});
    system.run_all();
  }
  ~tier_on_manual_system() { system.stop(); }

  std::vector<kv::block_hash> dropped() const {
    std::vector<kv::block_hash> out;
    for (const auto* u : test_support::received<sched::host_update>(sched_log)) out.insert(out.end(), u->dropped.begin(), u->dropped.end());
    return out;
  }
};

kv::block_hash hash_of(std::uint64_t i) { return kv::block_hash{{i, 2 * i + 1, 7, 9}}; }

kv::host_record block(std::uint64_t i, std::size_t n, std::mt19937& rng, bool spill = false) {
  kv::host_record r;
  r.hash = hash_of(i);
  r.parent = hash_of(i + 100);
  r.spill = spill;
  r.bytes.resize(n);
  for (auto& b : r.bytes) b = static_cast<std::byte>(rng());
  return r;
}

TEST(host_tier, hands_over_the_blocks_it_holds_and_empty_entries_for_what_it_lacks) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  metrics::registry registry;
  const tier_metrics m = tier_metrics::create(registry);
  tier_on_manual_system t(1000, false, m);
  const auto a = block(1, 300, rng), b = block(2, 300, rng);
  t.actor.tell(store{a});
  t.actor.tell(store{b});
  t.actor.tell(load{7, {hash_of(2), hash_of(3), hash_of(1)}});
  t.actor.tell(load{8, {hash_of(1)}});  // gone: a block read back leaves the tier
  t.system.run_all();
  const auto loaded = test_support::received<sched::ssd_loaded>(t.sched_log);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0]->order, 7u);
  ASSERT_EQ(loaded[0]->payloads.size(), 3u);
  ASSERT_TRUE(loaded[0]->payloads[0]);
  EXPECT_EQ(*loaded[0]->payloads[0], b.bytes);
  EXPECT_FALSE(loaded[0]->payloads[1]);
  ASSERT_TRUE(loaded[0]->payloads[2]);
  EXPECT_EQ(*loaded[0]->payloads[2], a.bytes);
  EXPECT_FALSE(loaded[1]->payloads[0]);
  EXPECT_TRUE(t.dropped().empty()) << "the scheduler knows what it ordered";
  EXPECT_EQ(m.blocks->value(), 0.0);
  EXPECT_EQ(m.bytes->value(), 0.0);
  EXPECT_EQ(m.hits->value(), 2u);
  EXPECT_EQ(m.misses->value(), 2u);
}

TEST(host_tier, what_it_evicts_past_its_budget_goes_on_to_the_ssd_when_marked_else_is_dropped) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  tier_on_manual_system t(1000, true);
  const auto spilled = block(1, 400, rng, true), dropped = block(2, 400, rng, false);
  t.actor.tell(store{spilled});
  t.actor.tell(store{dropped});
  t.actor.tell(store{block(3, 400, rng)});  // 1200 bytes: 1 goes
  t.actor.tell(store{block(4, 400, rng)});  // then 2
  t.actor.tell(store{block(5, 1001, rng, true)});  // alone past the budget: refused, passed on
  t.system.run_all();
  EXPECT_EQ(t.dropped(), (std::vector<kv::block_hash>{hash_of(1), hash_of(2), hash_of(5)}));
  const auto persisted = test_support::received<ssd::persist>(t.ssd_log);
  ASSERT_EQ(persisted.size(), 2u);
  EXPECT_EQ(persisted[0]->meta.hash, hash_of(1));
  EXPECT_EQ(persisted[0]->meta.parent, hash_of(101));
  EXPECT_EQ(persisted[0]->meta.layers, 5);
  EXPECT_EQ(persisted[0]->meta.tokens, 16);
  EXPECT_EQ(persisted[0]->payload, spilled.bytes);
  EXPECT_EQ(persisted[1]->meta.hash, hash_of(5));
  t.actor.tell(load{1, {hash_of(3), hash_of(4), hash_of(1)}});
  t.system.run_all();
  const auto loaded = test_support::received<sched::ssd_loaded>(t.sched_log);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(loaded[0]->payloads[0] && loaded[0]->payloads[1]);
  EXPECT_FALSE(loaded[0]->payloads[2]);
}

TEST(host_tier, clearing_drops_every_block_and_says_so_without_writing_any_to_the_ssd) {
  std::mt19937 rng(test_seed());
  tier_on_manual_system t(10000, true);
  t.actor.tell(store{block(1, 100, rng, true)});
  t.actor.tell(store{block(2, 100, rng)});
  t.actor.tell(clear{});
  t.actor.tell(load{3, {hash_of(1), hash_of(2)}});
  t.system.run_all();
  auto d = t.dropped();
  std::sort(d.begin(), d.end(), [](const auto& x, const auto& y) { return x.w < y.w; });
  EXPECT_EQ(d, (std::vector<kv::block_hash>{hash_of(1), hash_of(2)}));
  EXPECT_TRUE(test_support::received<ssd::persist>(t.ssd_log).empty()) << "cleared: the prefix cache was turned off";
  const auto loaded = test_support::received<sched::ssd_loaded>(t.sched_log);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_FALSE(loaded[0]->payloads[0]);
  EXPECT_FALSE(loaded[0]->payloads[1]);
}

/// Export answers, in the order they came.
struct export_answers {
  std::vector<std::optional<std::vector<std::byte>>> got;
  sched::export_done done() {
    return [this](std::optional<std::vector<std::byte>> r) { got.push_back(std::move(r)); };
  }
};

TEST(host_tier, exports_a_block_it_holds_as_a_wire_record_of_its_bytes_and_keeps_it) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  metrics::registry registry;
  const tier_metrics m = tier_metrics::create(registry);
  tier_on_manual_system t(100000, false, m);
  const std::array<std::uint64_t, 2> model{rng(), rng()};
  auto full = block(1, 1000 + rng() % 1000, rng);
  full.format = kv::kv_format::q8_0;
  auto tail = block(2, 1000 + rng() % 1000, rng);
  tail.token_ids = {static_cast<std::int32_t>(rng() % 30000), static_cast<std::int32_t>(rng() % 30000), 5};
  t.actor.tell(store{full});
  t.actor.tell(store{tail});
  export_answers a;
  t.actor.tell(export_record{hash_of(1), model, a.done()});
  t.actor.tell(export_record{hash_of(2), model, a.done()});
  t.actor.tell(export_record{hash_of(3), model, a.done()});  // never held, and no SSD to ask
  t.system.run_all();
  ASSERT_EQ(a.got.size(), 3u);
  ASSERT_TRUE(a.got[0] && a.got[1]);
  EXPECT_FALSE(a.got[2]);
  for (const auto* r : {&full, &tail}) {
    const auto& wire = *a.got[r == &full ? 0 : 1];
    ssd::wire_fault fault{};
    const auto rec = ssd::decode_wire_record(wire, {model, r->format, ssd::record_kind::block, r->hash, 0}, fault);
    ASSERT_EQ(fault, ssd::wire_fault::none) << ssd::to_string(fault);
    EXPECT_EQ(rec.payload, r->bytes) << "the bytes it stored";
    EXPECT_EQ(rec.meta.parent, r->parent);
    EXPECT_EQ(rec.meta.layers, 5);
    EXPECT_EQ(rec.meta.tokens, r->token_ids.empty() ? 16 : 3);
    EXPECT_EQ(rec.meta.token_ids, r->token_ids);
  }
  // Another model's fingerprint is not what the record says.
  ssd::wire_fault fault{};
  ssd::decode_wire_record(*a.got[0], {{model[0] + 1, model[1]}, full.format, ssd::record_kind::block, full.hash, 0}, fault);
  EXPECT_EQ(fault, ssd::wire_fault::other_model);
  // Exports take nothing out and count as no restore: both are still handed over.
  EXPECT_EQ(m.blocks->value(), 2.0);
  EXPECT_EQ(m.hits->value(), 0u);
  t.actor.tell(load{9, {hash_of(1), hash_of(2)}});
  t.system.run_all();
  const auto loaded = test_support::received<sched::ssd_loaded>(t.sched_log);
  ASSERT_EQ(loaded.size(), 1u);
  ASSERT_TRUE(loaded[0]->payloads[0] && loaded[0]->payloads[1]);
  EXPECT_EQ(*loaded[0]->payloads[0], full.bytes);
  EXPECT_EQ(*loaded[0]->payloads[1], tail.bytes);
}

TEST(host_tier, an_export_of_a_block_it_no_longer_holds_is_asked_of_the_ssd_store) {
  std::mt19937 rng(test_seed());
  tier_on_manual_system t(1000, true);
  t.actor.tell(store{block(1, 800, rng, true)});
  t.actor.tell(store{block(2, 800, rng, true)});  // 1 is evicted, passed on to the SSD
  export_answers a;
  t.actor.tell(export_record{hash_of(1), {1, 2}, a.done()});
  t.system.run_all();
  const auto asked = test_support::received<ssd::export_record>(t.ssd_log);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0]->key, hash_of(1));
  EXPECT_TRUE(a.got.empty()) << "the SSD store answers";
}

}  // namespace
}  // namespace strata::host_tier
