#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "src/api/messages_request.hpp"
#include "src/api/messages_writer.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;

TEST(messages_request, maps_system_blocks_tool_use_and_tool_results_onto_chat_messages) {
  auto r = parse_messages_request(R"({"model":"m","max_tokens":9,"system":[{"type":"text","text":"Be brief."}],
    "messages":[
      {"role":"user","content":"Weather in Oslo?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"Use the tool."},
                                     {"type":"tool_use","id":"tu_1","name":"weather","input":{"city":"Oslo"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"tu_1","content":[{"type":"text","text":"4 C"}]},
                                {"type":"text","text":"And tomorrow?"}]}],
    "tools":[{"name":"weather","description":"Forecast","input_schema":{"type":"object"}}],
    "tool_choice":{"type":"any","disable_parallel_tool_use":true},"stop_sequences":["END"],"stream":true})");
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(r->max_tokens, 9);
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->stop_sequences, std::vector<std::string>{"END"});
  const json::value want = json::parse(R"([
    {"role":"system","content":"Be brief."},
    {"role":"user","content":"Weather in Oslo?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"tu_1","type":"function",
      "function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}],"reasoning_content":"Use the tool."},
    {"role":"tool","tool_call_id":"tu_1","content":"4 C"},
    {"role":"user","content":"And tomorrow?"}])");
  EXPECT_EQ(json::value(r->messages), want) << json::serialize(r->messages);
  EXPECT_EQ(r->tools, json::parse(R"([{"type":"function","function":{"name":"weather","parameters":{"type":"object"},"description":"Forecast"}}])"));
  EXPECT_EQ(r->tool_choice, json::value("required"));
  EXPECT_FALSE(r->parallel_tool_calls);
}

TEST(messages_request, names_the_member_at_fault) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":1,"messages":{}})", "messages"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]})",
       "messages[0].content[0].type"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"top_p":2})", "top_p"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"some"}})", "tool_choice.type"},
      {R"({"max_tokens":1,"messages":[{"role":"user","content":"x"}]})", "model"},
  };
  for (const auto& [body, param] : cases) {
    auto r = parse_messages_request(body);
    ASSERT_FALSE(r.has_value()) << body;
    EXPECT_EQ(r.err().param, param) << body << ": " << r.err().message;
  }
  EXPECT_TRUE(parse_messages_request(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", true).has_value())
      << "count_tokens takes no max_tokens";
}

TEST(messages_writer, writes_a_message_and_its_events_in_anthropics_shapes) {
  const message_head head{"msg_1", "m"};
  const std::string stop = "END";
  auto m = json::parse(write_message(head, {{content_block::kind::text, "Hi", {}, {}}, {content_block::kind::tool_use, R"({"a":1})", "tu_2", "f"}},
                                     "stop_sequence", &stop, {7, 3, 2}));
  EXPECT_EQ(m, json::parse(R"({"id":"msg_1","type":"message","role":"assistant","model":"m",
    "content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"tu_2","name":"f","input":{"a":1}}],
    "stop_reason":"stop_sequence","stop_sequence":"END",
    "usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":3,"output_tokens":2}})"));
  EXPECT_EQ(write_block_delta(0, content_block::kind::text, "a\"b"),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\\\"b\"}}\n\n");
  EXPECT_EQ(write_message_delta("end_turn", nullptr, 5),
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
            "\"usage\":{\"output_tokens\":5}}\n\n");
  EXPECT_EQ(json::parse(write_anthropic_error({429, "busy", "rate_limit_error", {}, {}})),
            json::parse(R"({"type":"error","error":{"type":"rate_limit_error","message":"busy"}})"));
}

}  // namespace
}  // namespace strata::api::schema
