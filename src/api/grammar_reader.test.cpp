// The members that constrain the output: response_format, and llama.cpp's grammar and
// json_schema. Each becomes the request's grammar_spec; ill-typed ones are 400s naming the member.

#include <string>

#include <gtest/gtest.h>

#include "src/api/chat_request.hpp"
#include "src/api/completion_request.hpp"

namespace strata::api::schema {
namespace {

using kind = sampling::grammar_spec::kind;

std::string chat_with(const std::string& member) { return R"({"model":"m","messages":[{"role":"user","content":"hi"}],)" + member + "}"; }
std::string completion_with(const std::string& member) { return R"({"model":"m","prompt":"hi",)" + member + "}"; }

TEST(grammar_reader, response_format_json_schema_carries_the_schema_and_strict) {
  auto r = parse_chat_request(chat_with(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"description":"d","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}})"));
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(r->sampling.grammar.type, kind::json_schema);
  EXPECT_TRUE(r->sampling.grammar.strict);
  EXPECT_EQ(r->sampling.grammar.text, R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  EXPECT_EQ(r->sampling.grammar_field, "response_format");
}

TEST(grammar_reader, json_object_and_text_formats_are_read) {
  auto o = parse_chat_request(chat_with(R"("response_format":{"type":"json_object"})"));
  ASSERT_TRUE(o.has_value()) << o.err().message;
  EXPECT_EQ(o->sampling.grammar.type, kind::json_object);
  auto t = parse_chat_request(chat_with(R"("response_format":{"type":"text"})"));
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->sampling.grammar.active());
}

TEST(grammar_reader, llama_cpp_grammar_and_json_schema_fields_work_on_both_endpoints) {
  auto g = parse_completion_request(completion_with(R"("grammar":"root ::= \"a\"")"));
  ASSERT_TRUE(g.has_value()) << g.err().message;
  EXPECT_EQ(g->sampling.grammar.type, kind::ebnf);
  EXPECT_EQ(g->sampling.grammar.text, "root ::= \"a\"");
  EXPECT_EQ(g->sampling.grammar_field, "grammar");
  auto s = parse_chat_request(chat_with(R"("json_schema":{"type":"array"})"));
  ASSERT_TRUE(s.has_value()) << s.err().message;
  EXPECT_EQ(s->sampling.grammar.type, kind::json_schema);
  EXPECT_EQ(s->sampling.grammar.text, R"({"type":"array"})");
  EXPECT_EQ(s->sampling.grammar_field, "json_schema");
  auto empty = parse_completion_request(completion_with(R"("grammar":"")"));
  ASSERT_TRUE(empty.has_value());
  EXPECT_FALSE(empty->sampling.grammar.active()) << "an empty grammar is none, as in llama.cpp";
}

TEST(grammar_reader, ill_typed_members_are_refused_naming_the_member) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("response_format":{"type":"json_schema"})", "response_format"},
      {R"("response_format":{"type":"json_schema","json_schema":{"schema":{}}})", "response_format"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":"yes"}})", "response_format.json_schema.strict"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":[1]}})", "response_format.json_schema.schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":5}})", "response_format.json_schema.name"},
      {R"("response_format":{"type":"regex"})", "response_format"},
      {R"("grammar":5)", "grammar"},
      {R"("json_schema":"{}")", "json_schema"},
      {R"("json_schema":{},"grammar":"root ::= \"a\"")", "grammar"},
      {R"("response_format":{"type":"json_object"},"json_schema":{})", "json_schema"},
  };
  for (const auto& [member, param] : cases) {
    auto r = parse_chat_request(chat_with(member));
    ASSERT_FALSE(r.has_value()) << member;
    EXPECT_EQ(r.err().status, 400) << member;
    EXPECT_EQ(r.err().param, param) << member << ": " << r.err().message;
  }
}

}  // namespace
}  // namespace strata::api::schema
