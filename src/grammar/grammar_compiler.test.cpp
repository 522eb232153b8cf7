// The grammar compiler and matcher on a real vocabulary (GPT-2 byte-level BPE, 50k tokens):
// each spec kind accepts its language and rejects other text, errors say what is wrong, and the
// cache hands back what it compiled.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "src/grammar/grammar_compiler.hpp"
#include "src/grammar/grammar_matcher.hpp"
#include "src/grammar/grammar_test_support.test.hpp"

namespace strata::grammar {
namespace {

using kind = sampling::grammar_spec::kind;

TEST(grammar_compiler, gbnf_grammar_accepts_its_language_and_rejects_other_text) {
  auto g = fixture().compile(ebnf(R"(root ::= ("yes" | "no") " " [0-9]+)"));
  ASSERT_TRUE(g) << g.error.message;
  EXPECT_TRUE(match_text(g, "yes 42").completed);
  EXPECT_TRUE(match_text(g, "no 7").completed);
  EXPECT_FALSE(match_text(g, "maybe 1").accepted);
  EXPECT_FALSE(match_text(g, "yes x").accepted);
  // A prefix is accepted but not complete: the end-of-sequence token is not allowed yet.
  auto partial = match_text(g, "yes ");
  EXPECT_TRUE(partial.accepted);
  EXPECT_FALSE(partial.completed);
}

TEST(grammar_compiler, json_schema_output_follows_nested_objects_arrays_enums_and_required) {
  const std::string schema = R"({"type": "object",
    "properties": {
      "name": {"type": "string"},
      "size": {"enum": ["small", "large"]},
      "tags": {"type": "array", "items": {"type": "integer"}},
      "owner": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
    "required": ["name", "size", "owner"]})";
  auto g = fixture().compile(json_schema(schema, true));
  ASSERT_TRUE(g) << g.error.message;
  EXPECT_TRUE(match_text(g, R"({"name": "a", "size": "small", "tags": [1, 2], "owner": {"id": 3}})").completed);
  EXPECT_TRUE(match_text(g, R"({"name": "b", "size": "large", "owner": {"id": -1}})").completed);
  EXPECT_FALSE(match_text(g, R"({"name": "a", "size": "medium")").accepted) << "a value outside the enum";
  EXPECT_FALSE(match_text(g, R"({"name": "a", "size": "small", "owner": {}})").accepted) << "owner.id is required";
  EXPECT_FALSE(match_text(g, R"({"size": "small")").accepted) << "name comes first and is required";
  EXPECT_FALSE(match_text(g, R"({"name": "a", "size": "small", "tags": ["x"])").accepted) << "tags are integers";
  EXPECT_FALSE(match_text(g, R"({"name": "a", "size": "small", "owner": {"id": 1}, "extra": 1})").accepted)
      << "strict: no property beyond the schema's";
}

TEST(grammar_compiler, a_length_bounded_string_holds_no_raw_control_character) {
  // JSON strings escape their control characters: a raw tab would make the whole answer invalid
  // JSON, and a client's parser (or the server's own tool-call parser) reject it.
  sampling::grammar_spec s;
  s.type = kind::tool_calls;
  const std::string weather = R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]})";
  s.calls.push_back({"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", weather, "}\n</tool_call>"});
  auto g = fixture().compile(s);
  ASSERT_TRUE(g) << g.error.message;
  auto call = [](const std::string& city) {
    return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + city + "\"}}\n</tool_call>";
  };
  EXPECT_TRUE(match_text(g, call("Oslo")).completed);
  EXPECT_FALSE(match_text(g, call("Os\tlo")).accepted);
  EXPECT_FALSE(match_text(g, call("Os\x01lo")).accepted);
  EXPECT_FALSE(match_text(g, call("Oslo is far")).accepted) << "longer than maxLength";
}

TEST(grammar_compiler, json_object_accepts_any_object_and_nothing_else) {
  sampling::grammar_spec s;
  s.type = kind::json_object;
  auto g = fixture().compile(s);
  ASSERT_TRUE(g) << g.error.message;
  EXPECT_TRUE(match_text(g, R"({"anything": [1, {"nested": null}], "b": true})").completed);
  EXPECT_TRUE(match_text(g, "{}").completed);
  EXPECT_FALSE(match_text(g, "[1]").accepted);
  EXPECT_FALSE(match_text(g, "hello").accepted);
}

TEST(grammar_compiler, tool_calls_allow_only_the_declared_calls_with_their_arguments) {
  sampling::grammar_spec s;
  s.type = kind::tool_calls;
  const std::string weather = R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})";
  s.calls.push_back({"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", weather, "}\n</tool_call>"});
  s.calls.push_back({"<tool_call>\n{\"name\": \"get_time\", \"arguments\": ", "{}", "}\n</tool_call>"});
  auto g = fixture().compile(s);
  ASSERT_TRUE(g) << g.error.message;
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  EXPECT_TRUE(match_text(g, call).completed);
  EXPECT_TRUE(match_text(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>").completed);
  EXPECT_FALSE(match_text(g, "<tool_call>\n{\"name\": \"get_news\"").accepted) << "an undeclared function";
  EXPECT_FALSE(match_text(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\"").accepted);
  EXPECT_FALSE(match_text(g, "Sure! " + call).accepted) << "nothing before the call";
  // Not parallel: one call, then the end.
  EXPECT_FALSE(match_text(g, call + call).accepted);

  s.parallel = true;
  s.separator = "\n";
  auto p = fixture().compile(s);
  ASSERT_TRUE(p) << p.error.message;
  EXPECT_TRUE(match_text(p, call + "\n" + call).completed);
}

TEST(grammar_compiler, triggered_calls_leave_text_free_and_constrain_each_call_the_model_starts) {
  sampling::grammar_spec s;
  s.type = kind::tool_calls;
  s.trigger = "<tool_call>";
  const std::string weather =
      R"({"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima"]}}, "required": ["city"], "additionalProperties": false})";
  s.calls.push_back({"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", weather, "}\n</tool_call>"});
  auto g = fixture().compile(s);
  ASSERT_TRUE(g) << g.error.message;
  EXPECT_TRUE(match_text(g, "No call needed: it is sunny, {\"city\": \"London\"} even.").completed) << "text is free";
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  EXPECT_TRUE(match_text(g, "Let me look. " + call).completed);
  EXPECT_FALSE(match_text(g, "Let me look. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London").accepted)
      << "a started call follows the schema";
  EXPECT_FALSE(match_text(g, "<tool_call>\n{\"name\": \"get_news\"").accepted) << "an undeclared function";
  EXPECT_FALSE(match_text(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}").completed)
      << "a call must be closed";
}

TEST(grammar_compiler, a_reasoning_block_may_come_before_the_constrained_answer) {
  auto s = json_schema(R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})", true);
  s.reasoning = sampling::grammar_spec::free_block{"<think>", "</think>"};
  auto g = fixture().compile(s);
  ASSERT_TRUE(g) << g.error.message;
  EXPECT_TRUE(match_text(g, "<think>free text, even {braces}</think>{\"ok\": true}").completed);
  EXPECT_TRUE(match_text(g, "{\"ok\": false}").completed) << "the block is optional";
  EXPECT_FALSE(match_text(g, "plain text").accepted);

  s.reasoning->open = "";  // the prompt opened the block
  auto opened = fixture().compile(s);
  ASSERT_TRUE(opened) << opened.error.message;
  EXPECT_TRUE(match_text(opened, "still thinking</think>{\"ok\": true}").completed);
}

TEST(grammar_compiler, a_bad_schema_or_grammar_is_an_error_that_says_why) {
  auto bad_json = fixture().compile(json_schema("{\"type\": ", true));
  EXPECT_FALSE(bad_json);
  EXPECT_FALSE(bad_json.error.message.empty());
  auto bad_type = fixture().compile(json_schema(R"({"type": "no-such-type"})", true));
  EXPECT_FALSE(bad_type);
  auto bad_gbnf = fixture().compile(ebnf("root ::= (\"a\""));
  EXPECT_FALSE(bad_gbnf);
  ASSERT_FALSE(bad_gbnf.error.message.empty());
  EXPECT_NE(bad_gbnf.error.message.front(), '[') << "no log prefix: " << bad_gbnf.error.message;
  EXPECT_NE(bad_gbnf.error.message.find("line 1"), std::string::npos) << bad_gbnf.error.message;
  auto no_root = fixture().compile(ebnf("start ::= \"a\""));
  EXPECT_FALSE(no_root);

  sampling::grammar_spec s;
  s.type = kind::tool_calls;
  s.calls.push_back({"<a>", "{}", "</a>"});
  s.calls.push_back({"<b>", "{\"type\": [", "</b>"});
  auto bad_call = fixture().compile(s);
  EXPECT_FALSE(bad_call);
  EXPECT_EQ(bad_call.error.call, 1) << "the second call's schema is at fault";
}

TEST(grammar_compiler, a_spec_compiled_again_comes_from_the_cache) {
  grammar_compiler c(fixture_vocabulary(), 2);
  auto s = json_schema(R"({"type": "object", "properties": {"n": {"type": "integer"}}})", true);
  auto first = c.compile(s);
  auto second = c.compile(s);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first.grammar, second.grammar);
  EXPECT_EQ(c.cache_hits(), 1u);
  EXPECT_EQ(c.cache_misses(), 1u);
  // Another strictness is another grammar; and the cache keeps only the two most recent.
  s.strict = false;
  EXPECT_NE(c.compile(s).grammar, first.grammar);
  c.compile(ebnf("root ::= \"x\""));
  EXPECT_NE(c.compile(json_schema(R"({"type": "object", "properties": {"n": {"type": "integer"}}})", true)).grammar, first.grammar)
      << "the least recently used entry was dropped";
}

TEST(grammar_compiler, spec_keys_differ_whenever_the_specs_do) {
  auto a = json_schema("{}", true);
  auto b = json_schema("{}", false);
  EXPECT_NE(spec_key(a), spec_key(b));
  sampling::grammar_spec t1, t2;
  t1.type = t2.type = kind::tool_calls;
  t1.calls.push_back({"ab", "{}", "c"});
  t2.calls.push_back({"a", "b{}", "c"});
  EXPECT_NE(spec_key(t1), spec_key(t2));
  auto t3 = t1;
  t3.trigger = "a";
  EXPECT_NE(spec_key(t1), spec_key(t3));
}

TEST(grammar_matcher, after_the_end_only_stop_tokens_are_allowed) {
  auto g = fixture().compile(ebnf(R"(root ::= "ok")"));
  ASSERT_TRUE(g);
  grammar_matcher m(g.grammar);
  for (auto t : fixture_tokenizer().encode("ok", false, false)) ASSERT_TRUE(m.accept(t));
  EXPECT_TRUE(m.completed());
  const auto eos = m.stop_tokens().front();
  std::vector<float> logits(static_cast<std::size_t>(fixture().vocab_size()), 1.0f);
  m.mask_logits(logits.data(), static_cast<std::int32_t>(logits.size()));
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const bool stop = std::find(m.stop_tokens().begin(), m.stop_tokens().end(), static_cast<std::int32_t>(i)) != m.stop_tokens().end();
    ASSERT_EQ(std::isinf(logits[i]), !stop) << "token " << i;
  }
  EXPECT_TRUE(m.accept(eos));
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.accept(fixture_tokenizer().encode("x", false, false).front()));
}

}  // namespace
}  // namespace strata::grammar
