// Every reference rendering of ../shared/templates/expected.json, byte for byte, and the
// feature cases of features.json (both produced by Python jinja2 as apply_chat_template sets
// it up).

#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "src/chat/chat_template.hpp"
#include "tests/support/test_seed.hpp"
#include "src/chat/fixed_clock.test.hpp"

namespace {

using strata::chat::chat_template;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using strata::chat::testing::fixed_day;

TEST(templates, render_every_reference_case_of_expected_json_byte_for_byte) {
  const std::string dir = std::string(STRATA_SHARED_DIR) + "/templates/";
  auto expected = boost::json::parse(read_file(dir + "expected.json")).as_object();
  const auto& conversations = expected.at("conversations").as_object();
  std::string bos(expected.at("bos_token").as_string());
  std::string eos(expected.at("eos_token").as_string());
  int cases = 0, errors = 0, passed = 0;
  for (const auto& [name, entry] : expected.at("templates").as_object()) {
    auto tpl = chat_template::parse(read_file(dir + std::string(name)));
    ASSERT_TRUE(tpl) << name << ": " << tpl.err().message;
    tpl->set_clock(fixed_day);
    for (const auto& [case_name, c] : entry.at("cases").as_object()) {
      std::string key(case_name);
      auto bar = key.find('|');
      ASSERT_NE(bar, std::string::npos);
      const auto& messages = conversations.at(key.substr(0, bar)).as_array();
      bool gen = key.substr(bar + 1) == "gen";
      auto out = tpl->render_chat(messages, gen, bos, eos);
      const auto& obj = c.as_object();
      ++cases;
      if (obj.at("ok").as_bool()) {
        EXPECT_TRUE(out) << name << " " << key << ": " << out.err().message;
        if (!out) continue;
        EXPECT_EQ(*out, std::string(obj.at("text").as_string())) << name << " " << key;
        if (*out == obj.at("text").as_string()) ++passed;
      } else {
        ++errors;
        EXPECT_FALSE(out) << name << " " << key << " rendered but the reference raised";
        if (out) continue;
        EXPECT_EQ(out.err().code, strata::errc::template_error);
        EXPECT_EQ(out.err().message, std::string(obj.at("error").as_string())) << name << " " << key;
        if (out.err().message == obj.at("error").as_string()) ++passed;
      }
    }
  }
  std::cout << passed << " of " << cases << " reference cases match\n";
  EXPECT_EQ(passed, cases);
  EXPECT_EQ(cases, 80);
  EXPECT_GT(errors, 0);
}

TEST(templates, render_every_feature_case_like_jinja2) {
  auto features = boost::json::parse(read_file(STRATA_TEMPLATE_FEATURES)).as_array();
  ASSERT_GT(features.size(), 100u);
  for (const auto& f : features) {
    const auto& c = f.as_object();
    std::string source(c.at("template").as_string());
    auto tpl = chat_template::parse(source);
    if (c.contains("syntax_error")) {
      EXPECT_FALSE(tpl) << source;
      continue;
    }
    EXPECT_TRUE(tpl) << source << ": " << tpl.err().message;
    if (!tpl) continue;
    tpl->set_clock(fixed_day);
    auto out = tpl->render(c.at("context"));
    if (c.contains("error")) {
      EXPECT_FALSE(out) << source << " rendered " << *out;
      if (out) continue;
      if (c.at("raised").as_bool()) {
        EXPECT_EQ(out.err().message, std::string(c.at("error").as_string())) << source;
      }
    } else {
      EXPECT_TRUE(out) << source << ": " << out.err().message;
      if (!out) continue;
      EXPECT_EQ(*out, std::string(c.at("text").as_string())) << source;
    }
  }
}

TEST(templates, never_crash_on_mutated_reference_templates) {
  // Truncations, deleted spans and flipped bytes of the real templates, rendered with a real
  // conversation: each gives a rendering or an error, never a crash or a hang.
  const std::string dir = std::string(STRATA_SHARED_DIR) + "/templates/";
  auto expected = boost::json::parse(read_file(dir + "expected.json")).as_object();
  const auto& messages = expected.at("conversations").at("multi_turn").as_array();
  const unsigned seed = strata::test_seed();
  std::mt19937 rng(seed);
  const char replacements[] = "{}%#-()[]|.,'\"=~ \nxi0";
  strata::chat::render_limits limits;
  limits.max_loop_iterations = 20000;
  int rendered = 0, failed = 0;
  for (const auto& [name, entry] : expected.at("templates").as_object()) {
    const std::string original = read_file(dir + std::string(name));
    for (int i = 0; i < 150; ++i) {
      std::string source = original;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !source.empty(); ++e) {
        std::size_t at = rng() % source.size();
        switch (rng() % 3) {
          case 0: source.resize(at); break;
          case 1: source.erase(at, 1 + rng() % 20); break;
          default: source[at] = replacements[rng() % (sizeof(replacements) - 1)]; break;
        }
      }
      auto tpl = chat_template::parse(source);
      if (!tpl) {
        EXPECT_EQ(tpl.err().code, strata::errc::template_error) << name << " seed " << seed;
        ++failed;
        continue;
      }
      tpl->set_limits(limits);
      auto out = tpl->render_chat(messages, i % 2 == 0, "<s>", "</s>");
      if (out) ++rendered;
      else ++failed;
    }
  }
  EXPECT_GT(rendered, 0) << "seed " << seed;
  EXPECT_GT(failed, 0) << "seed " << seed;
}

}  // namespace
