#include "src/common/metrics.hpp"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace strata::metrics {
namespace {

TEST(metrics, renders_counters_gauges_and_cumulative_histogram_buckets) {
  registry r;
  auto& c = r.make_counter("strata_requests_total", "Requests.", "status=\"200\"");
  auto& c404 = r.make_counter("strata_requests_total", "Requests.", "status=\"404\"");
  auto& g = r.make_gauge("strata_running", "Running sequences.");
  auto& h = r.make_histogram("strata_ttft_seconds", "Time to first token.", {0.1, 1, 10});
  c.inc(3);
  c404.inc();
  g.set(2.5);
  for (double v : {0.05, 0.5, 0.5, 5.0, 50.0}) h.observe(v);
  std::string text = r.render();
  EXPECT_NE(text.find("# TYPE strata_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("strata_requests_total{status=\"200\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("strata_requests_total{status=\"404\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("strata_running 2.5\n"), std::string::npos);
  EXPECT_NE(text.find("strata_ttft_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_ttft_seconds_bucket{le=\"1\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("strata_ttft_seconds_bucket{le=\"10\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("strata_ttft_seconds_bucket{le=\"+Inf\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("strata_ttft_seconds_count 5\n"), std::string::npos);
  EXPECT_NE(text.find("strata_ttft_seconds_sum 56.05"), std::string::npos);
}

TEST(metrics, concurrent_updates_are_all_counted) {
  registry r;
  auto& c = r.make_counter("strata_x_total", "x");
  auto& h = r.make_histogram("strata_y", "y", {1});
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(0.5);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(c.value(), 40000u);
  EXPECT_EQ(h.count(), 40000u);
  EXPECT_DOUBLE_EQ(h.sum(), 20000.0);
}

TEST(metrics, a_name_reused_with_another_type_is_refused) {
  registry r;
  r.make_counter("strata_z", "z");
  EXPECT_THROW(r.make_gauge("strata_z", "z"), std::logic_error);
}

}  // namespace
}  // namespace strata::metrics
