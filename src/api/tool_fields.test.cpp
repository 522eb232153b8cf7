// Unit tests of the grammar that forces tool calls, in each format.

#include "src/api/tool_fields.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

namespace strata::api::schema {
namespace {

namespace json = boost::json;
using sampling::grammar_spec;

const json::value tools = json::parse(R"([
  {"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}},
  {"type":"function","function":{"name":"b"}}])");

chat::tool_format format(const char* template_source) { return chat::detect_tool_format(template_source); }

TEST(forced_tool_grammar, under_auto_with_strict_tools_constrains_the_calls_the_model_starts) {
  const json::value strict = json::parse(R"([
    {"type":"function","function":{"name":"a","strict":true,"parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}},
    {"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{"y":{"type":"string"}}}}}])");
  for (const char* choice : {R"("auto")", "null"}) {
    auto g = forced_tool_grammar(format("<tool_call>"), strict, json::parse(choice), true, std::nullopt);
    ASSERT_TRUE(g.active()) << choice;
    EXPECT_EQ(g.trigger, "<tool_call>");
    ASSERT_EQ(g.calls.size(), 2u);
    EXPECT_TRUE(g.calls[0].begin.starts_with(g.trigger));
    EXPECT_EQ(json::parse(g.calls[0].schema), json::parse(R"({"type":"object","properties":{"x":{"type":"integer"}}})"));
    EXPECT_EQ(g.calls[1].schema, "{}") << "a tool that is not strict takes any object";
  }
  auto h = forced_tool_grammar(format("<|channel|>"), strict, "auto", true, std::nullopt);
  EXPECT_EQ(h.trigger, "<|channel|>commentary to=functions.");
  EXPECT_FALSE(forced_tool_grammar(format("[TOOL_CALLS]"), strict, "auto", true, std::nullopt).active())
      << "a list format has no marker of each call's own";
}

TEST(forced_tool_grammar, asks_for_nothing_under_auto_none_or_no_choice) {
  for (const char* choice : {R"("auto")", R"("none")", "null"})
    EXPECT_FALSE(forced_tool_grammar(format("<tool_call>"), tools, json::parse(choice), true, std::nullopt).active()) << choice;
}

TEST(forced_tool_grammar, allows_any_tool_under_required_in_hermes_blocks) {
  auto g = forced_tool_grammar(format("<tool_call>"), tools, "required", true, grammar_spec::free_block{"<think>", "</think>"});
  EXPECT_EQ(g.type, grammar_spec::kind::tool_calls);
  ASSERT_EQ(g.calls.size(), 2u);
  EXPECT_EQ(g.calls[0].begin, "<tool_call>\n{\"name\": \"a\", \"arguments\": ");
  EXPECT_EQ(g.calls[0].schema, R"({"type":"object","properties":{"x":{"type":"integer"}}})");
  EXPECT_EQ(g.calls[0].end, "}\n</tool_call>");
  EXPECT_EQ(g.calls[1].schema, "{}");
  EXPECT_TRUE(g.parallel);
  EXPECT_EQ(g.separator, "\n");
  ASSERT_TRUE(g.reasoning);
  EXPECT_EQ(g.reasoning->open, "<think>");
  EXPECT_FALSE(forced_tool_grammar(format("<tool_call>"), tools, "required", false, std::nullopt).parallel);
}

TEST(forced_tool_grammar, allows_only_the_named_function_once) {
  auto g = forced_tool_grammar(format("[TOOL_CALLS]"), tools, json::parse(R"({"type":"function","function":{"name":"b"}})"), true,
                               std::nullopt);
  ASSERT_EQ(g.calls.size(), 1u);
  EXPECT_EQ(g.calls[0].begin, "{\"name\": \"b\", \"arguments\": ");
  EXPECT_EQ(g.prefix, "[TOOL_CALLS][");
  EXPECT_EQ(g.suffix, "]");
  EXPECT_FALSE(g.parallel);
}

TEST(forced_tool_grammar, writes_llama3_and_harmony_calls_in_their_own_shape) {
  auto l = forced_tool_grammar(format("\"parameters\" <|python_tag|>"), tools, "required", true, std::nullopt);
  EXPECT_EQ(l.calls[0].begin, "{\"name\": \"a\", \"parameters\": ");
  EXPECT_FALSE(l.parallel);
  auto h = forced_tool_grammar(format("<|channel|>"), tools, "required", true, std::nullopt);
  EXPECT_EQ(h.calls[1].begin, "<|channel|>commentary to=functions.b <|constrain|>json<|message|>");
  EXPECT_EQ(h.calls[1].end, "<|call|>");
  ASSERT_TRUE(h.reasoning);
  EXPECT_EQ(h.reasoning->open, "<|channel|>analysis<|message|>");
  EXPECT_FALSE(forced_tool_grammar(format("<function=f><parameter=p>"), tools, "required", true, std::nullopt).active());
}

}  // namespace
}  // namespace strata::api::schema
