// cluster_client against a real three-master Redis cluster: keys on every master, MOVED after a
// slot changed hands, ASK during a migration, a killed master.

#include "io/redis/cluster_client.hpp"

#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <gtest/gtest.h>

#include "io/redis/redis_cluster.test.hpp"

namespace strata::redis {
namespace {

using testing::redis_cluster;
using testing::sync_command;

TEST(key_slot, follows_the_cluster_spec_crc16_and_hash_tags) {
  EXPECT_EQ(key_slot("123456789"), 0x31c3 % 16384);  // CRC16/XMODEM check value
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));  // an empty tag hashes the whole key
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
}

TEST(parse_node, takes_host_and_port_and_refuses_anything_else) {
  auto n = parse_node("10.0.0.1:7001");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->host, "10.0.0.1");
  EXPECT_EQ(n->port, 7001);
  EXPECT_FALSE(parse_node("10.0.0.1"));
  EXPECT_FALSE(parse_node("10.0.0.1:0"));
  EXPECT_FALSE(parse_node(":80"));
}

class cluster_client_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_cluster::available()) GTEST_SKIP() << "redis-server and redis-cli are not installed (scripts/install-deps.sh)";
    cluster = std::make_unique<redis_cluster>();
    ASSERT_TRUE(cluster->created) << "redis-cli --cluster create failed";
    cluster_options o;
    o.seeds.push_back({"127.0.0.1", cluster->ports[0]});  // one seed: the others are learnt
    o.timeout = std::chrono::milliseconds(1000);
    client = cluster_client::create(strand, o);
  }
  void TearDown() override {
    if (client) client->close();
    ctx.run_for(std::chrono::milliseconds(50));
  }

  /// Runs one command to its end.
  result<reply> run(std::vector<std::string> argv) {
    std::optional<result<reply>> out;
    client->command(std::move(argv), [&](result<reply> r) { out.emplace(std::move(r)); });
    ctx.restart();
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!out && std::chrono::steady_clock::now() < end) ctx.run_one_for(std::chrono::milliseconds(100));
    if (!out) return error{errc::io_error, "test: no answer in 10 s"};
    return std::move(*out);
  }

  /// A key that the cluster places on master i's slots (by asking the map).
  std::string key_on(std::size_t i, const std::string& prefix) {
    const std::string node = "127.0.0.1:" + std::to_string(cluster->ports[i]);
    for (int n = 0;; ++n) {
      std::string k = prefix + std::to_string(n);
      if (client->node_of(k) == node) return k;
    }
  }

  boost::asio::io_context ctx;
  boost::asio::strand<boost::asio::io_context::executor_type> strand = boost::asio::make_strand(ctx);
  std::unique_ptr<redis_cluster> cluster;
  std::shared_ptr<cluster_client> client;
};

TEST_F(cluster_client_test, keys_spread_over_every_master_are_written_and_read_back) {
  std::set<std::string> nodes;
  for (int i = 0; i < 30; ++i) {
    const std::string k = "strata:test:" + std::to_string(i);
    auto w = run({"SET", k, "v" + std::to_string(i)});
    ASSERT_TRUE(w) << w.err().message;
    ASSERT_EQ(w->str, "OK");
    nodes.insert(client->node_of(k));
  }
  EXPECT_EQ(nodes.size(), 3u) << "30 keys land on all three masters";
  for (int i = 0; i < 30; ++i) {
    auto r = run({"GET", "strata:test:" + std::to_string(i)});
    ASSERT_TRUE(r) << r.err().message;
    EXPECT_EQ(r->str, "v" + std::to_string(i));
  }
  EXPECT_EQ(client->moved(), 0u);
}

TEST_F(cluster_client_test, a_slot_given_to_another_master_is_followed_through_moved) {
  ASSERT_TRUE(run({"PING"}));  // the map is in
  const std::string k = key_on(0, "moved:");
  const std::string slot = std::to_string(key_slot(k));
  const std::string to = cluster->id(1);
  // The slot holds no key: it can be handed over at once, on both masters.
  ASSERT_EQ(sync_command(cluster->ports[1], {"CLUSTER", "SETSLOT", slot, "NODE", to}), "OK");
  ASSERT_EQ(sync_command(cluster->ports[0], {"CLUSTER", "SETSLOT", slot, "NODE", to}), "OK");
  auto w = run({"SET", k, "here"});
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_EQ(w->str, "OK");
  EXPECT_GE(client->moved(), 1u);
  EXPECT_EQ(sync_command(cluster->ports[1], {"GET", k}), "here") << "the key lives on the new master";
  EXPECT_EQ(client->node_of(k), "127.0.0.1:" + std::to_string(cluster->ports[1]));
}

TEST_F(cluster_client_test, a_key_of_a_slot_in_migration_is_written_where_ask_points_and_the_map_stays) {
  ASSERT_TRUE(run({"PING"}));
  const std::string k = key_on(0, "ask:");
  const std::string slot = std::to_string(key_slot(k));
  ASSERT_EQ(sync_command(cluster->ports[1], {"CLUSTER", "SETSLOT", slot, "IMPORTING", cluster->id(0)}), "OK");
  ASSERT_EQ(sync_command(cluster->ports[0], {"CLUSTER", "SETSLOT", slot, "MIGRATING", cluster->id(1)}), "OK");
  auto w = run({"SET", k, "moving"});
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_EQ(w->str, "OK");
  EXPECT_GE(client->asked(), 1u);
  auto r = run({"GET", k});
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->str, "moving");
  EXPECT_EQ(client->node_of(k), "127.0.0.1:" + std::to_string(cluster->ports[0])) << "ASK changes no map";
  EXPECT_EQ(client->moved(), 0u);
}

TEST_F(cluster_client_test, a_killed_master_fails_its_keys_quickly_and_the_others_still_answer) {
  ASSERT_TRUE(run({"PING"}));
  const std::string dead = key_on(2, "dead:"), alive = key_on(1, "alive:");
  cluster->kill(2);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run({"SET", dead, "x"});
  EXPECT_FALSE(r && !r->is_error()) << "a write to a dead master does not succeed";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  auto w = run({"SET", alive, "y"});
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_EQ(w->str, "OK");
  // Meanwhile the dead master's keys fail at once, without a connection attempt each.
  auto again = run({"GET", dead});
  ASSERT_FALSE(again);
  EXPECT_NE(again.err().message.find("down"), std::string::npos) << again.err().message;
}

}  // namespace
}  // namespace strata::redis
