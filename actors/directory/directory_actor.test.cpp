// directory_actor against a real three-master Redis cluster: blocks stored are listed under their
// keys with this replica's URL, looked up in chain order, taken out when no tier holds them, and
// entries past their time are not live.

#include "actors/directory/directory_actor.hpp"

#include <set>

#include <gtest/gtest.h>

#include "actors/runtime/actor_system.hpp"
#include "io/redis/redis_cluster.test.hpp"
#include "src/kv/directory_key.hpp"

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

TEST(directory_actor, lists_stored_blocks_on_the_masters_answers_lookups_in_chain_order_and_drops_what_no_tier_holds) {
  if (!redis_cluster::available()) GTEST_SKIP() << "redis-server and redis-cli are not installed (scripts/install-deps.sh)";
  redis_cluster cluster;
  ASSERT_TRUE(cluster.created);
  actors::actor_system sys({.threads = 0});
  directory_options o;
  o.redis.seeds = *redis::parse_nodes(cluster.seeds());
  o.model = {7, 8};
  o.block_tokens = 16;
  o.ttl = std::chrono::seconds(30);
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

}  // namespace
}  // namespace strata::directory
