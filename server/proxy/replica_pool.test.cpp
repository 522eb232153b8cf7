// replica_pool: the choice leaves out the replicas a request already tried and those that failed,
// and counts what is in flight where.

#include "server/proxy/replica_pool.hpp"

#include <gtest/gtest.h>

namespace strata::proxy {
namespace {

const std::vector<std::string> urls{"http://a:1", "http://b:2/", "http://c:3"};

TEST(replica_pool, prefers_the_holder_of_the_longest_prefix_and_never_one_already_tried) {
  metrics::registry m;
  replica_pool pool(urls, m, {});
  EXPECT_EQ(pool.at(1).url, "http://b:2") << "the trailing slash goes, as in the directory";
  const std::vector<std::vector<std::string>> holders{{"http://b:2", "http://c:3"}, {"http://b:2"}};
  auto c = pool.choose(holders, {});
  EXPECT_EQ(c.replica, 1);
  EXPECT_EQ(c.cached_blocks, 2);
  c = pool.choose(holders, {1});
  EXPECT_EQ(c.replica, 2);
  EXPECT_EQ(c.cached_blocks, 1);
  EXPECT_EQ(pool.choose(holders, {0, 1, 2}).replica, -1);
}

TEST(replica_pool, a_failed_replica_is_out_of_the_choice_and_load_spreads_the_rest) {
  metrics::registry m;
  replica_pool pool(urls, m, {});
  pool.failed(0);
  pool.started(1);
  EXPECT_EQ(pool.any({}), 2) << "the least busy live replica";
  pool.started(2);
  pool.started(2);
  EXPECT_EQ(pool.any({}), 1);
  pool.ended(2);
  pool.ended(2);
  EXPECT_EQ(pool.at(2).in_flight, 0);
  EXPECT_NE(m.render().find("strata_route_replica_up{replica=\"http://a:1\"} 0"), std::string::npos) << m.render();
}

}  // namespace
}  // namespace strata::proxy
