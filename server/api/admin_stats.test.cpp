#include "server/api/admin_stats.hpp"

#include <gtest/gtest.h>

namespace strata::api {
namespace {

TEST(admin_stats, a_quantile_interpolates_inside_its_bucket) {
  metrics::histogram h({0.1, 0.2, 0.4});
  for (int i = 0; i < 50; ++i) h.observe(0.05);  // bucket (0, 0.1]
  for (int i = 0; i < 50; ++i) h.observe(0.3);   // bucket (0.2, 0.4]
  EXPECT_DOUBLE_EQ(*histogram_quantile(h, 0.5), 0.1);
  EXPECT_NEAR(*histogram_quantile(h, 0.25), 0.05, 1e-12);
  EXPECT_NEAR(*histogram_quantile(h, 0.9), 0.2 + 0.2 * 0.8, 1e-12);
}

TEST(admin_stats, a_quantile_past_the_last_bound_is_the_last_bound_and_an_empty_histogram_has_none) {
  metrics::histogram h({1, 2});
  EXPECT_FALSE(histogram_quantile(h, 0.5).has_value());
  h.observe(10);
  EXPECT_DOUBLE_EQ(*histogram_quantile(h, 0.99), 2);
}

}  // namespace
}  // namespace strata::api
