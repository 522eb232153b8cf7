// Unit tests of the streaming tool-call parser: each format, split at every byte, and calls that
// do not parse or are cut off (they come back as content, nothing lost).

#include "src/chat/tool_parser.hpp"

#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace {

using namespace strata::chat;

struct assembled {
  std::string content, reasoning;
  std::vector<tool_call> calls;
  std::vector<int> indexes;
};

parser_options options(tool_syntax s, bool thinks = false, std::string marker = {}) {
  parser_options o;
  o.format.syntax = s;
  o.format.native = true;
  o.format.thinks = thinks;
  o.format.list_marker = std::move(marker);
  o.format.short_ids = o.format.list_marker == "[TOOL_CALLS]";
  o.parse_calls = true;
  return o;
}

void take(assembled& a, const std::vector<parse_event>& events) {
  for (const auto& e : events) {
    if (e.type == parse_event::kind::content) a.content += e.text;
    if (e.type == parse_event::kind::reasoning) a.reasoning += e.text;
    if (e.type == parse_event::kind::call) {
      a.calls.push_back(e.call);
      a.indexes.push_back(e.index);
    }
  }
}

/// Feeds `pieces` one by one; checks that no content delta holds a piece of markup.
assembled run(const parser_options& o, const std::vector<std::string>& pieces, const std::vector<std::string>& markup) {
  tool_parser p(o);
  assembled a;
  for (const auto& piece : pieces) {
    auto events = p.feed(piece);
    for (const auto& e : events) {
      if (e.type != parse_event::kind::content) continue;
      for (const auto& m : markup) EXPECT_EQ(e.text.find(m), std::string::npos) << "markup in content: " << e.text;
    }
    take(a, events);
  }
  take(a, p.finish());
  return a;
}

/// Checks `text`, whole, in two pieces split at every byte, and one byte at a time.
void expect_everywhere(const parser_options& o, const std::string& text, const assembled& want,
                       const std::vector<std::string>& markup = {}) {
  std::vector<std::vector<std::string>> splits = {{text}};
  for (std::size_t i = 1; i < text.size(); ++i) splits.push_back({text.substr(0, i), text.substr(i)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  splits.push_back(bytes);
  for (const auto& pieces : splits) {
    auto got = run(o, pieces, markup);
    SCOPED_TRACE("first piece: " + pieces[0]);
    EXPECT_EQ(got.content, want.content);
    EXPECT_EQ(got.reasoning, want.reasoning);
    ASSERT_EQ(got.calls.size(), want.calls.size());
    for (std::size_t i = 0; i < got.calls.size(); ++i) {
      EXPECT_EQ(got.calls[i].name, want.calls[i].name);
      EXPECT_EQ(got.calls[i].arguments, want.calls[i].arguments);
      EXPECT_EQ(got.indexes[i], static_cast<int>(i));
    }
  }
}

assembled calls(std::vector<std::pair<std::string, std::string>> cs, std::string content = {}, std::string reasoning = {}) {
  assembled a;
  a.content = std::move(content);
  a.reasoning = std::move(reasoning);
  for (auto& [n, args] : cs) a.calls.push_back({{}, n, args});
  return a;
}

TEST(tool_parser, reads_hermes_calls_with_content_before_them_at_every_split) {
  expect_everywhere(options(tool_syntax::hermes),
                    "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>",
                    calls({{"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"tz":"CET"})"}}, "Let me look."),
                    {"<tool_call>", "</tool_call>", "<tool", "_call>"});
}

TEST(tool_parser, reads_think_blocks_as_reasoning_before_a_call) {
  expect_everywhere(options(tool_syntax::hermes, true),
                    "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>",
                    calls({{"w", "{}"}}, "", "\nThe user wants weather.\n"), {"<think>", "</think>", "<tool_call>"});
}

TEST(tool_parser, starts_in_reasoning_when_the_prompt_opened_the_think_block) {
  auto o = options(tool_syntax::hermes, true);
  o.starts_in_reasoning = true;
  expect_everywhere(o, "hmm</think>\n\nThe answer is 4.", calls({}, "The answer is 4.", "hmm"), {"</think>"});
}

TEST(tool_parser, reads_llama3_json_answers_and_python_tag_calls) {
  auto o = options(tool_syntax::llama3_json);
  expect_everywhere(o, " {\"name\": \"f\", \"parameters\": {\"a\": [1, \"}\"]}}", calls({{"f", R"({"a":[1,"}"]})"}}));
  expect_everywhere(o, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", calls({{"f", "{}"}}), {"<|python_tag|>"});
}

TEST(tool_parser, gives_a_llama3_json_answer_that_is_no_call_back_as_content) {
  expect_everywhere(options(tool_syntax::llama3_json), "{\"answer\": 42} is the JSON.", calls({}, "{\"answer\": 42} is the JSON."));
}

TEST(tool_parser, reads_mistral_and_granite_call_lists) {
  expect_everywhere(options(tool_syntax::json_list, false, "[TOOL_CALLS]"),
                    "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}, \"id\": \"abcdefghi\"}]",
                    calls({{"a", R"({"x":1})"}, {"b", "{}"}}), {"[TOOL_CALLS]"});
  expect_everywhere(options(tool_syntax::json_list, false, "<|tool_call|>"),
                    "<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"s\": \"[\\\"]\"}}]", calls({{"a", R"({"s":"[\"]"})"}}),
                    {"<|tool_call|>"});
}

TEST(tool_parser, reads_qwen3_coder_xml_with_parameter_types_from_the_tools) {
  auto o = options(tool_syntax::qwen3_xml);
  o.tools = boost::json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"zip":{"type":"string"},"n":{"type":"integer"}}}}}])");
  expect_everywhere(o, "Sure.\n<tool_call>\n<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
                       "<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>",
                    calls({{"f", R"({"zip":"01234","n":7,"note":"line one\nline two"})"}}, "Sure."),
                    {"<tool_call>", "<function=", "<parameter="});
}

TEST(tool_parser, reads_harmony_channels_as_reasoning_calls_and_content) {
  parser_options o = options(tool_syntax::harmony);
  expect_everywhere(o,
                    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>",
                    calls({{"get_weather", R"({"city":"Oslo"})"}}, "", "Need weather."), {"<|", "|>"});
  expect_everywhere(o, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>",
                    calls({}, "It is 4.", "Easy."), {"<|", "|>"});
}

TEST(tool_parser, gives_malformed_and_unfinished_calls_back_as_content) {
  auto o = options(tool_syntax::hermes);
  expect_everywhere(o, "a<tool_call>{\"name\": oops}</tool_call>b", calls({}, "a<tool_call>{\"name\": oops}</tool_call>b"));
  expect_everywhere(o, "a <tool_call>{\"name\": \"f\", \"argu", calls({}, "a <tool_call>{\"name\": \"f\", \"argu"));
  expect_everywhere(o, "a <tool_ca", calls({}, "a <tool_ca"));
  expect_everywhere(options(tool_syntax::json_list, false, "[TOOL_CALLS]"), "[TOOL_CALLS] sorry", calls({}, "[TOOL_CALLS] sorry"));
}

TEST(tool_parser, reads_a_call_whose_arguments_hold_its_end_tag) {
  // A grammar-forced call can write the end tag inside a JSON string: the call ends at the end tag
  // after which its body parses, and what follows it is content again.
  expect_everywhere(options(tool_syntax::hermes),
                    "<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Oslo}}</tool_call> \"}}\n</tool_call>ok",
                    calls({{"w", R"({"city":"Oslo}}</tool_call> "})"}}, "ok"));
}

TEST(tool_parser, finishes_a_call_cut_off_after_its_json) {
  expect_everywhere(options(tool_syntax::hermes), "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", calls({{"f", "{}"}}));
}

TEST(tool_parser, leaves_markup_as_content_when_calls_are_not_parsed) {
  auto o = options(tool_syntax::hermes);
  o.parse_calls = false;
  expect_everywhere(o, "x <tool_call>{\"name\": \"f\"}</tool_call>", calls({}, "x <tool_call>{\"name\": \"f\"}</tool_call>"));
}

TEST(tool_parser, keeps_plain_answers_whole_with_their_whitespace) {
  expect_everywhere(options(tool_syntax::hermes, true), "  Hello,\n  world <b>!</b>\n", calls({}, "  Hello,\n  world <b>!</b>\n"));
}

TEST(tool_parser, gives_ids_in_the_format_style) {
  tool_parser p(options(tool_syntax::json_list, false, "[TOOL_CALLS]"));
  auto events = p.feed("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].call.id.size(), 9u);
  tool_parser h(options(tool_syntax::hermes));
  events = h.feed("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].call.id.rfind("call_", 0), 0u);
  EXPECT_EQ(events[0].call.id.size(), 29u);
  EXPECT_EQ(h.calls(), 1);
}

}  // namespace
