#include "tests/support/test_seed.hpp"

#include <cstdlib>
#include <optional>

#include <gtest/gtest.h>

namespace strata {
namespace {

/// Sets STRATA_TEST_SEED for one scope and puts back what was there.
class seed_env {
 public:
  explicit seed_env(const char* value) {
    if (const char* old = std::getenv("STRATA_TEST_SEED")) old_ = old;
    if (value) {
      ::setenv("STRATA_TEST_SEED", value, 1);
    } else {
      ::unsetenv("STRATA_TEST_SEED");
    }
  }
  ~seed_env() {
    if (old_) {
      ::setenv("STRATA_TEST_SEED", old_->c_str(), 1);
    } else {
      ::unsetenv("STRATA_TEST_SEED");
    }
  }

 private:
  std::optional<std::string> old_;
};

std::string recorded_seed() {
  const auto& result = *::testing::UnitTest::GetInstance()->current_test_info()->result();
  for (int i = 0; i < result.test_property_count(); ++i) {
    if (std::string_view(result.GetTestProperty(i).key()) == "seed") return result.GetTestProperty(i).value();
  }
  return {};
}

TEST(test_seed, parses_a_32_bit_decimal_seed_and_nothing_else) {
  EXPECT_EQ(parse_test_seed("0"), 0u);
  EXPECT_EQ(parse_test_seed("12345"), 12345u);
  EXPECT_EQ(parse_test_seed("4294967295"), 4294967295u);
  EXPECT_FALSE(parse_test_seed("4294967296"));
  EXPECT_FALSE(parse_test_seed("-1"));
  EXPECT_FALSE(parse_test_seed("12ab"));
  EXPECT_FALSE(parse_test_seed(""));
  EXPECT_FALSE(parse_test_seed(nullptr));
}

TEST(test_seed, takes_the_seed_from_strata_test_seed_and_records_it) {
  seed_env env("987654321");
  EXPECT_EQ(test_seed(), 987654321u);
  EXPECT_EQ(recorded_seed(), "987654321");
}

TEST(test_seed, draws_one_seed_per_test_and_returns_it_on_every_call) {
  seed_env env(nullptr);
  const auto first = test_seed();
  EXPECT_EQ(recorded_seed(), std::to_string(first));
  EXPECT_EQ(test_seed(), first);
  // Set now, the variable does not change the seed this test already drew.
  seed_env later("1");
  EXPECT_EQ(test_seed(), first);
}

}  // namespace
}  // namespace strata
