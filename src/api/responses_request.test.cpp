#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "src/api/responses_request.hpp"
#include "src/api/responses_writer.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;

TEST(responses_request, maps_items_tools_and_text_format_onto_the_chat_shape) {
  auto r = parse_responses_request(R"({"model":"m","instructions":"Be brief.","input":[
      {"role":"user","content":[{"type":"input_text","text":"Weather?"}]},
      {"type":"reasoning","id":"rs_1","summary":[]},
      {"type":"function_call","call_id":"c1","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
      {"type":"function_call","call_id":"c2","name":"weather","arguments":"{\"city\":\"Rome\"}"},
      {"type":"function_call_output","call_id":"c1","output":"4 C"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Cold."}]}],
    "tools":[{"type":"function","name":"weather","parameters":{"type":"object"},"strict":true}],
    "tool_choice":{"type":"function","name":"weather"},"parallel_tool_calls":false,"max_output_tokens":7,
    "text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}},
    "reasoning":{"effort":"low"},"store":false,"previous_response_id":"resp_1","seed":5})");
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(json::value(r->instructions), json::parse(R"([{"role":"system","content":"Be brief."}])"));
  EXPECT_EQ(json::value(r->input), json::parse(R"([
    {"role":"user","content":"Weather?"},
    {"role":"assistant","content":null,"tool_calls":[
      {"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}},
      {"id":"c2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"4 C"},
    {"role":"assistant","content":"Cold."}])")) << json::serialize(r->input);
  EXPECT_EQ(r->tools, json::parse(R"([{"type":"function","function":{"name":"weather","parameters":{"type":"object"},"strict":true}}])"));
  EXPECT_EQ(r->tool_choice, json::parse(R"({"type":"function","function":{"name":"weather"}})"));
  EXPECT_FALSE(r->parallel_tool_calls);
  EXPECT_FALSE(r->store);
  EXPECT_EQ(r->max_output_tokens, 7);
  EXPECT_EQ(r->seed, 5);
  EXPECT_EQ(r->previous_response_id, "resp_1");
  EXPECT_EQ(r->reasoning_effort, "low");
  EXPECT_EQ(r->grammar.type, sampling::grammar_spec::kind::json_schema);
  EXPECT_TRUE(r->grammar.strict);
  EXPECT_EQ(json::parse(r->grammar.text), json::parse(R"({"type":"object"})"));
  EXPECT_EQ(r->echo_tool_choice, json::parse(R"({"type":"function","name":"weather"})"));
}

TEST(responses_request, a_string_input_is_one_user_message_and_defaults_are_echoed) {
  auto r = parse_responses_request(R"({"model":"m","input":"hi"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(json::value(r->input), json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_TRUE(r->instructions.empty());
  EXPECT_TRUE(r->store);
  EXPECT_EQ(r->echo_tool_choice, json::value("auto"));
  EXPECT_EQ(r->echo_text, json::parse(R"({"format":{"type":"text"}})"));
}

TEST(responses_request, names_the_member_at_fault) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model":"m"})", "input"},
      {R"({"input":"x"})", "model"},
      {R"({"model":"m","input":[{"type":"item_reference","id":"x"}]})", "input[0].type"},
      {R"({"model":"m","input":[{"type":"function_call_output","output":"x"}]})", "input[0].call_id"},
      {R"({"model":"m","input":"x","tools":[{"type":"function","name":""}]})", "tools[0].name"},
      {R"({"model":"m","input":"x","tools":[{"type":"file_search"}]})", "tools[0].type"},
      {R"({"model":"m","input":"x","tool_choice":{"type":"function","name":"f"}})", "tool_choice"},
      {R"({"model":"m","input":"x","text":{"format":{"type":"yaml"}}})", "text.format.type"},
      {R"({"model":"m","input":"x","max_output_tokens":-1})", "max_output_tokens"},
      {R"({"model":"m","input":"x","top_p":1.5})", "top_p"},
  };
  for (const auto& [body, param] : cases) {
    auto r = parse_responses_request(body);
    ASSERT_FALSE(r.has_value()) << body;
    EXPECT_EQ(r.err().param.substr(0, std::string(param).size()), param) << body << ": " << r.err().message;
  }
}

TEST(responses_writer, numbers_events_in_order_and_writes_items_as_the_sdk_reads_them) {
  response_state st;
  st.id = "resp_1";
  st.model = "m";
  st.tools = json::array();
  st.tool_choice = "auto";
  response_events ev;
  const response_item call{response_item::kind::function_call, "fc_1", R"({"a":1})", "call_1", "f", true};
  std::string created = ev.lifecycle("response.created", st);
  EXPECT_NE(created.find("\"sequence_number\":0}"), std::string::npos);
  EXPECT_NE(created.find("\"usage\":null"), std::string::npos);
  std::string added = ev.item_added(0, call);
  EXPECT_NE(added.find(R"("item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"f","arguments":""})"),
            std::string::npos) << added;
  EXPECT_NE(ev.delta(0, call, "{\"a\"").find("\"sequence_number\":2}"), std::string::npos);
  st.status = "completed";
  st.output = {call};
  st.input_tokens = 5;
  st.output_tokens = 3;
  auto body = json::parse(write_response(st));
  EXPECT_EQ(body.at("output"), json::parse(R"([{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}])"));
  EXPECT_EQ(body.at("usage").at("total_tokens"), 8);
  EXPECT_TRUE(body.at("incomplete_details").is_null());
}

}  // namespace
}  // namespace strata::api::schema
