#include "src/route/replica_choice.hpp"

#include <gtest/gtest.h>

namespace strata::route {
namespace {

using holders_t = std::vector<std::vector<std::string>>;

std::vector<replica_state> three(int a = 0, int b = 0, int c = 0) {
  return {{"http://a", true, a}, {"http://b", true, b}, {"http://c", true, c}};
}

TEST(cached_prefix, counts_the_blocks_held_from_the_first_and_stops_at_a_gap) {
  holders_t h{{"http://a", "http://b"}, {"http://b"}, {"http://a", "http://b"}};
  EXPECT_EQ(cached_prefix(h, "http://a"), 1);
  EXPECT_EQ(cached_prefix(h, "http://b"), 3);
  EXPECT_EQ(cached_prefix(h, "http://c"), 0);
}

TEST(choose_replica, the_longest_cached_prefix_wins) {
  holders_t h{{"http://a", "http://c"}, {"http://c"}, {}};
  auto c = choose_replica(three(), h);
  EXPECT_EQ(c.replica, 2);
  EXPECT_EQ(c.cached_blocks, 2);
}

TEST(choose_replica, a_replica_busier_than_the_least_busy_by_more_than_the_slack_loses_its_prefix) {
  holders_t h{{"http://c"}, {"http://c"}};
  EXPECT_EQ(choose_replica(three(0, 1, 4), h).replica, 2) << "within the slack";
  auto c = choose_replica(three(0, 1, 5), h);
  EXPECT_EQ(c.replica, 0) << "past it: the least busy";
  EXPECT_EQ(c.cached_blocks, 0);
}

TEST(choose_replica, with_no_prefix_anywhere_equal_replicas_take_turns_and_the_less_busy_goes_first) {
  holders_t none;
  int last = -1;
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) order.push_back(last = choose_replica(three(), none, last).replica);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(choose_replica(three(2, 1, 2), none, 0).replica, 1);
}

TEST(choose_replica, dead_replicas_are_skipped_and_none_alive_is_no_choice) {
  holders_t h{{"http://b"}};
  auto r = three();
  r[1].alive = false;
  EXPECT_NE(choose_replica(r, h).replica, 1);
  for (auto& x : r) x.alive = false;
  EXPECT_EQ(choose_replica(r, h).replica, -1);
}

}  // namespace
}  // namespace strata::route
