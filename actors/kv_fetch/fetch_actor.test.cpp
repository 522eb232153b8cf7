// fetch_actor's choice of the replica each block is fetched from.
#include "actors/kv_fetch/fetch_actor.hpp"

#include <gtest/gtest.h>

namespace strata::kv_fetch {
namespace {

using list = std::vector<std::vector<std::string>>;
using urls = std::vector<std::string>;

TEST(pick_sources, the_holder_of_the_longest_run_from_the_start_serves_all_of_it) {
  const list holders{{"http://a", "http://b"}, {"http://b", "http://a"}, {"http://b"}, {"http://c"}};
  EXPECT_EQ(pick_sources(holders, "http://self"), (urls{"http://b", "http://b", "http://b", "http://c"}));
}

TEST(pick_sources, this_replica_is_never_a_source_and_the_chain_stops_at_the_first_block_no_other_holds) {
  const list holders{{"http://self", "http://a"}, {"http://a"}, {"http://self"}, {"http://a"}};
  EXPECT_EQ(pick_sources(holders, "http://self"), (urls{"http://a", "http://a"}));
  EXPECT_TRUE(pick_sources(list{{}, {"http://a"}}, "http://self").empty());
  EXPECT_TRUE(pick_sources(list{}, "http://self").empty());
}

}  // namespace
}  // namespace strata::kv_fetch
