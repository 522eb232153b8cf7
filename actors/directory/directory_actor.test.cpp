// directory_actor against a real three-master Redis cluster: blocks stored are listed under their
// keys with this replica's URL, looked up in chain order, taken out when no tier holds them, and
// entries past their time are not live.

#include "actors/directory/directory_actor.hpp"

#include <array>
#include <cstdint>
#include <set>

#include <gtest/gtest.h>

#include "actors/runtime/actor_system.hpp"
#include "io/redis/redis_cluster.test.hpp"
#include "src/kv/directory_key.hpp"
#include "tests/support/probe_actor.hpp"

namespace strata::directory {
namespace {

using redis::testing::redis_cluster;
using redis::testing::sync_command;

struct answers {
  std::vector<lookup_result> got;
};
using answer_inbox = std::variant<lookup_result>;
class answer_sink final : public actors::actor<answer_inbox> {
 public:
  explicit answer_sink(answers* a) : a_(a) {}
  void receive(answer_inbox msg) override { a_->got.push_back(std::get<lookup_result>(std::move(msg))); }

 private:
  answers* a_;
};

kv::block_event event(kv::block_event::kind what, kv::kv_tier tier, std::uint64_t h) {
  kv::block_event e;
  e.what = what;
  e.tier = tier;
  e.hash.w = {h, h + 1, h + 2, h + 3};
  return e;
}

TEST(live_holders, keeps_the_fields_whose_time_is_still_ahead) {
  redis::reply r;
  r.type = redis::reply::kind::array;
  for (auto [f, v] : {std::pair{"http://a", "100"}, std::pair{"http://b", "99"}, std::pair{"http://c", "x"}}) {
    r.elements.push_back({redis::reply::kind::string, 0, f, {}});
    r.elements.push_back({redis::reply::kind::string, 0, v, {}});
  }
  EXPECT_EQ(live_holders(r, 99), (std::vector<std::string>{"http://a"}));
}

/// A directory on `cluster`'s masters for model fingerprint `model`: blocks of 16 tokens, 30 s TTL.
directory_options options_for(const redis_cluster& cluster, std::array<std::uint64_t, 2> model) {
  directory_options o;
  o.redis.seeds = *redis::parse_nodes(cluster.seeds());
  o.model = model;
  o.block_tokens = 16;
  o.ttl = std::chrono::seconds(30);
  return o;
}

TEST(directory_actor, lists_stored_blocks_on_the_masters_answers_lookups_in_chain_order_and_drops_what_no_tier_holds) {
  if (!redis_cluster::available()) GTEST_SKIP() << "redis-server and redis-cli are not installed (scripts/install-deps.sh)";
  redis_cluster cluster;
  ASSERT_TRUE(cluster.created);
  actors::actor_system sys({.threads = 0});
  directory_options o = options_for(cluster, {7, 8});
  auto dir = sys.spawn<directory_actor>("directory", actors::supervision::stop_system, o, directory_metrics{});
  answers a;
  auto sink = sys.spawn<answer_sink>("sink", actors::supervision::stop_system, &a);
  dir.tell(start{"http://replica-1:8080"});
  using kind = kv::block_event::kind;
  std::vector<kv::block_event> stored;
  for (std::uint64_t i = 0; i < 12; ++i) stored.push_back(event(kind::stored, kv::kv_tier::ram, 100 * (i + 1)));
  stored.push_back(event(kind::stored, kv::kv_tier::ssd, 100));  // block 0 on the SSD too
  dir.tell(kv_events::block_batch{stored});
  // Block 1 leaves RAM (gone), block 0 leaves RAM (still on the SSD).
  dir.tell(kv_events::block_batch{{event(kind::removed, kv::kv_tier::ram, 200), event(kind::removed, kv::kv_tier::ram, 100)}});
  sys.run_all();

  // Every write lands on the master of its key; the twelve keys reach all three.
  const std::string prefix = kv::directory_prefix(o.model);
  std::set<int> masters;
  for (std::uint64_t i = 0; i < 12; ++i) {
    const std::string k = kv::directory_key(prefix, kv::kv_format::f16, 16, event(kind::stored, kv::kv_tier::ram, 100 * (i + 1)).hash);
    for (int p : cluster.ports) {
      if (sync_command(p, {"CLUSTER", "KEYSLOT", k}) != std::to_string(redis::key_slot(k))) ADD_FAILURE() << "slot of " << k;
    }
    ASSERT_TRUE(sys.run_until([&] {
      for (int p : cluster.ports)
        if (sync_command(p, {"EXISTS", k}) == (i == 1 ? "0" : "1")) {
          masters.insert(p);
          return true;
        }
      return false;
    }, std::chrono::seconds(10))) << "key " << i;
  }
  EXPECT_EQ(masters.size(), 3u);

  std::vector<kv::block_hash> chain;
  for (std::uint64_t i = 0; i < 4; ++i) chain.push_back(event(kind::stored, kv::kv_tier::ram, 100 * (i + 1)).hash);
  dir.tell(lookup{1, kv::kv_format::f16, chain, sink});
  ASSERT_TRUE(sys.run_until([&] { return !a.got.empty(); }, std::chrono::seconds(10)));
  const auto& h = a.got[0].holders;
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0], (std::vector<std::string>{"http://replica-1:8080"})) << "still on the SSD";
  EXPECT_TRUE(h[1].empty()) << "left every tier";
  EXPECT_EQ(h[2], (std::vector<std::string>{"http://replica-1:8080"}));
  // Another format is another key: nothing there.
  dir.tell(lookup{2, kv::kv_format::q8_0, chain, sink});
  ASSERT_TRUE(sys.run_until([&] { return a.got.size() == 2; }, std::chrono::seconds(10)));
  for (const auto& x : a.got[1].holders) EXPECT_TRUE(x.empty());
  sys.stop();
}

using export_inbox = std::variant<sched::export_block>;

TEST(directory_actor, a_block_held_only_in_the_host_tier_is_listed_and_leaves_when_no_tier_holds_it) {
  if (!redis_cluster::available()) GTEST_SKIP() << "redis-server and redis-cli are not installed (scripts/install-deps.sh)";
  redis_cluster cluster;
  ASSERT_TRUE(cluster.created);
  actors::actor_system sys({.threads = 0});
  directory_options o = options_for(cluster, {7, 9});
  o.value_max = 8192;  // every block's record is kept in Redis itself
  o.block_bytes = {1000, 1000, 1000};
  auto dir = sys.spawn<directory_actor>("directory", actors::supervision::stop_system, o, directory_metrics{});
  answers a;
  auto sink = sys.spawn<answer_sink>("sink", actors::supervision::stop_system, &a);
  auto exports = test_support::make_probe_log<export_inbox>();
  auto exporter = sys.spawn<test_support::probe_actor<export_inbox>>("exports", actors::supervision::stop_system, exports);
  dir.tell(start{"http://replica-2:8080", exporter});
  using kind = kv::block_event::kind;
  using kv::kv_tier;
  // 1: the host tier only. 2: the SSD only. 3: RAM and the host tier. 4: the SSD, then the host tier.
  dir.tell(kv_events::block_batch{{event(kind::stored, kv_tier::host, 1000), event(kind::stored, kv_tier::ssd, 2000),
                                   event(kind::stored, kv_tier::ram, 3000), event(kind::stored, kv_tier::host, 3000),
                                   event(kind::stored, kv_tier::ssd, 4000), event(kind::stored, kv_tier::host, 4000)}});
  sys.run_all();
  // A fresh block in RAM or the host tier is copied out for Redis; one first seen on the SSD is not.
  const auto asked = test_support::received<sched::export_block>(exports);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0]->hash, event(kind::stored, kv_tier::host, 1000).hash);
  EXPECT_EQ(asked[1]->hash, event(kind::stored, kv_tier::ram, 3000).hash);
  std::vector<std::byte> record(2000);
  for (std::size_t i = 0; i < record.size(); ++i) record[i] = static_cast<std::byte>(i * 7 + 1);
  asked[0]->done(record);
  sys.run_all();

  std::vector<kv::block_hash> chain;
  for (std::uint64_t h : {1000, 2000, 3000, 4000}) chain.push_back(event(kind::stored, kv_tier::ram, h).hash);
  const std::vector<std::string> me{"http://replica-2:8080"};
  dir.tell(lookup{1, kv::kv_format::f16, chain, sink});
  ASSERT_TRUE(sys.run_until([&] { return a.got.size() == 1; }, std::chrono::seconds(10)));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(a.got[0].holders[i], me) << "block " << i;
  ASSERT_EQ(a.got[0].values.size(), 4u);
  EXPECT_EQ(a.got[0].values[0], std::string(reinterpret_cast<const char*>(record.data()), record.size()))
      << "the host tier's copy, kept in Redis";

  // 3 leaves RAM and 4 the SSD: the host tier still holds both. Then 1 and 4 leave the host tier.
  dir.tell(kv_events::block_batch{{event(kind::removed, kv_tier::ram, 3000), event(kind::removed, kv_tier::ssd, 4000)}});
  dir.tell(lookup{2, kv::kv_format::f16, chain, sink});
  dir.tell(kv_events::block_batch{{event(kind::removed, kv_tier::host, 1000), event(kind::removed, kv_tier::host, 4000),
                                   event(kind::removed, kv_tier::ram, 2000)}});  // 2 was never in RAM: still listed
  dir.tell(lookup{3, kv::kv_format::f16, chain, sink});
  ASSERT_TRUE(sys.run_until([&] { return a.got.size() == 3; }, std::chrono::seconds(10)));
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(a.got[1].holders[i], me) << "block " << i;
  EXPECT_TRUE(a.got[2].holders[0].empty()) << "left the only tier holding it";
  EXPECT_TRUE(a.got[2].values[0].empty()) << "its record goes with it";
  EXPECT_EQ(a.got[2].holders[1], me);
  EXPECT_EQ(a.got[2].holders[2], me);
  EXPECT_TRUE(a.got[2].holders[3].empty());
  sys.stop();
}

}  // namespace
}  // namespace strata::directory
