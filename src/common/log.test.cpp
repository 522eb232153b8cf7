#include "src/common/log.hpp"

#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

namespace strata::log {
namespace {

TEST(log, request_ids_are_unique_and_well_formed) {
  std::set<std::string> seen;
  for (int i = 0; i < 100'000; ++i) {
    auto id = new_request_id();
    ASSERT_EQ(id.size(), 20u);
    ASSERT_EQ(id.rfind("req-", 0), 0u);
    ASSERT_TRUE(seen.insert(id).second) << id;
  }
}

TEST(log, json_mode_writes_one_object_per_line_with_the_request_id) {
  init("info", true);
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_formatter(make_formatter(true));
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(sink);
  access("req-0123456789abcdef", "POST", "/v1/chat/completions", 200, 12, 8, 34, 56.78);
  spdlog::warn("plain \"quoted\"\nline");
  access("req-0123456789abcdef", "GET", "/v1/models", 200, 0, 0, 0, 1.0, "team-a");
  logger->sinks().pop_back();
  std::string text = out.str();
  auto first = text.substr(0, text.find('\n'));
  EXPECT_NE(first.find("\"level\":\"info\""), std::string::npos) << first;
  EXPECT_NE(first.find("\"request_id\":\"req-0123456789abcdef\""), std::string::npos) << first;
  EXPECT_NE(first.find("\"msg\":\"POST /v1/chat/completions 200 tokens=12+34 cached=8 ms=56.8\""), std::string::npos) << first;
  auto second = text.substr(first.size() + 1);
  auto third = second.substr(second.find('\n') + 1);
  second = second.substr(0, second.find('\n'));
  EXPECT_NE(second.find("\"msg\":\"plain \\\"quoted\\\"\\nline\""), std::string::npos) << second;
  EXPECT_EQ(second.find("request_id"), std::string::npos);
  // A named API key is appended to the line, after the fields every line has.
  EXPECT_NE(third.find("\"msg\":\"GET /v1/models 200 tokens=0+0 cached=0 ms=1.0 key=team-a\""), std::string::npos) << third;
}

TEST(log, json_escape_handles_controls_and_quotes) {
  EXPECT_EQ(json_escape("a\"b\\c\x01"), "a\\\"b\\\\c\\u0001");
}

}  // namespace
}  // namespace strata::log
