#include "actors/hot_cache/hot_cache.hpp"

#include <random>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/runtime/actor_system.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::hot_cache {
namespace {

pressure report(std::int64_t free_bytes, std::vector<candidate> c) { return {free_bytes, 1000, std::move(c), {}}; }

TEST(hot_cache, chooses_persisted_blocks_first_then_the_oldest_until_the_high_watermark) {
  // Free 10 of 1000 bytes; low 2% = 20, high 5% = 50: 40 bytes to find, 10 a block.
  auto p = report(10, {{1, 10, false}, {2, 10, true}, {3, 10, false}, {4, 10, true}, {5, 10, false}, {6, 10, false}});
  EXPECT_EQ(choose_victims(p, {0.02, 0.05}), (std::vector<std::int32_t>{2, 4, 1, 3}));
}

TEST(hot_cache, a_report_whose_pool_has_room_again_evicts_nothing) {
  EXPECT_TRUE(choose_victims(report(20, {{1, 10, true}}), {0.02, 0.05}).empty());
}

TEST(hot_cache, takes_what_there_is_when_the_candidates_do_not_reach_the_mark) {
  EXPECT_EQ(choose_victims(report(0, {{7, 10, false}}), {0.02, 0.05}), (std::vector<std::int32_t>{7}));
}

TEST(hot_cache, never_chooses_more_bytes_than_needed_past_the_last_block_and_keeps_the_lru_order) {
  const auto seed = test_seed();
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  for (int round = 0; round < 200; ++round) {
    std::vector<candidate> c;
    for (int i = 0; i < 20; ++i) c.push_back({i, 1 + static_cast<std::int64_t>(rng() % 30), rng() % 2 == 0});
    const std::int64_t free_bytes = static_cast<std::int64_t>(rng() % 20);
    auto victims = choose_victims(report(free_bytes, c), {0.02, 0.05});
    std::int64_t got = 0;
    std::vector<std::int32_t> persisted, other;
    for (auto v : victims) {
      got += c[static_cast<std::size_t>(v)].bytes;
      (c[static_cast<std::size_t>(v)].persisted ? persisted : other).push_back(v);
    }
    const std::int64_t need = 50 - free_bytes;
    // Enough (or everything), and without the last victim it would not have been enough.
    if (victims.size() < c.size()) EXPECT_GE(got, need);
    ASSERT_FALSE(victims.empty());
    EXPECT_LT(got - c[static_cast<std::size_t>(victims.back())].bytes, need);
    // Persisted ones first, each group in the report's (LRU) order.
    EXPECT_TRUE(std::is_sorted(persisted.begin(), persisted.end()));
    EXPECT_TRUE(std::is_sorted(other.begin(), other.end()));
    if (!other.empty() && !persisted.empty()) {
      EXPECT_LT(std::find(victims.begin(), victims.end(), persisted.back()), std::find(victims.begin(), victims.end(), other.front()));
    }
  }
}

struct answers {
  std::vector<reclaim> got;
};
using answer_inbox = std::variant<reclaim>;
class answer_sink final : public actors::actor<answer_inbox> {
 public:
  explicit answer_sink(answers* a) : a_(a) {}
  void receive(answer_inbox msg) override { a_->got.push_back(std::get<reclaim>(std::move(msg))); }

 private:
  answers* a_;
};

TEST(hot_cache, the_actor_answers_every_report_on_its_reply_port_even_with_nothing_to_evict) {
  answers a;
  actors::actor_system sys({.threads = 0});
  auto sink = sys.spawn<answer_sink>("sink", actors::supervision::stop_system, &a);
  auto actor = sys.spawn<hot_cache>("hot-cache", actors::supervision::stop_system, watermarks{0.02, 0.05});
  actor.tell(pressure{0, 1000, {{3, 30, false}, {4, 30, true}}, sink});
  actor.tell(pressure{500, 1000, {{3, 30, false}}, sink});
  sys.run_all();
  ASSERT_EQ(a.got.size(), 2u);
  EXPECT_EQ(a.got[0].blocks, (std::vector<std::int32_t>{4, 3}));
  EXPECT_TRUE(a.got[1].blocks.empty());
}

}  // namespace
}  // namespace strata::hot_cache
