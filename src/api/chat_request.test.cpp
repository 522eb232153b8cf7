#include "src/api/chat_request.hpp"

#include <random>
#include <string>

#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace strata::api::schema {
namespace {

const std::string valid_body =
    R"({"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],)"
    R"("temperature":0.5,"top_p":0.9,"stop":["x","y"],"stream":true,"stream_options":{"include_usage":true},"max_tokens":7,"seed":-3,"n":2})";

std::string with(std::string member) {
  return R"({"model":"m","messages":[{"role":"user","content":"hi"}],)" + member + "}";
}

api_error error_of(const std::string& body) {
  auto r = parse_chat_request(body);
  EXPECT_FALSE(r.has_value()) << body;
  return r ? api_error{} : r.err();
}

TEST(chat_request, parses_a_full_body) {
  auto r = parse_chat_request(valid_body);
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(r->model, "m");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[0].content, "be brief");
  EXPECT_EQ(r->messages[1].content, "a\nb");
  EXPECT_EQ(boost::json::serialize(r->messages_json[1]), R"({"role":"user","content":"a\nb"})");
  EXPECT_TRUE(r->sampling.stream);
  EXPECT_TRUE(r->sampling.include_usage);
  EXPECT_FLOAT_EQ(r->sampling.sampler.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r->sampling.sampler.top_p, 0.9f);
  EXPECT_EQ(r->sampling.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(r->sampling.max_tokens, 7);
  EXPECT_EQ(r->sampling.seed, -3);
  EXPECT_EQ(r->sampling.n, 2);
}

TEST(chat_request, keeps_tools_tool_calls_and_extra_message_members_as_json) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"q"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"reasoning_content":"r"},
    {"role":"tool","tool_call_id":"c1","content":"42"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","parallel_tool_calls":false})");
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_TRUE(r->messages[1].content_null);
  EXPECT_EQ(r->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[2].tool_call_id, "c1");
  EXPECT_TRUE(r->messages_json[1].as_object().at("content").is_null());
  EXPECT_EQ(r->messages_json[1].as_object().at("reasoning_content").as_string(), "r");
  EXPECT_EQ(r->tools.as_array().size(), 1u);
  EXPECT_EQ(r->tool_choice.as_string(), "auto");
  EXPECT_FALSE(r->sampling.parallel_tool_calls);
}

TEST(chat_request, accepts_every_role_and_refuses_unknown_ones) {
  for (const char* role : {"system", "user", "assistant", "tool", "developer"})
    EXPECT_TRUE(parse_chat_request(std::string(R"({"messages":[{"role":")") + role + R"(","content":"x"}]})").has_value()) << role;
  auto e = error_of(R"({"messages":[{"role":"wizard","content":"x"}]})");
  EXPECT_EQ(e.param, "messages[0].role");
  EXPECT_NE(e.message.find("wizard"), std::string::npos);
}

TEST(chat_request, refuses_missing_and_malformed_messages) {
  EXPECT_EQ(error_of(R"({"model":"m"})").param, "messages");
  EXPECT_EQ(error_of(R"({"messages":[]})").param, "messages");
  EXPECT_EQ(error_of(R"({"messages":"hi"})").message, "messages must be an array");
  EXPECT_EQ(error_of(R"({"messages":[{"content":"x"}]})").param, "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user"}]})").param, "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":5}]})").param, "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})").param,
            "messages[0].content[0].type");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})").param, "messages[0].content[0].text");
  EXPECT_EQ(error_of(R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":1}}]}]})").param,
            "messages[0].tool_calls[0].function.name");
  EXPECT_EQ(error_of(with(R"("tools":{})")).param, "tools");
  EXPECT_EQ(error_of(with(R"("tool_choice":3)")).param, "tool_choice");
}

const std::string weather_tool =
    R"({"type":"function","function":{"name":"get_weather-2","description":"d","parameters":{"type":"object"},"strict":true}})";

TEST(chat_request, accepts_well_formed_tools_and_every_tool_choice) {
  for (std::string choice : {R"("none")", R"("auto")", R"("required")", "null",
                             R"({"type":"function","function":{"name":"get_weather-2"}})"}) {
    auto r = parse_chat_request(with(R"("tools":[)" + weather_tool + R"(],"tool_choice":)" + choice + R"(,"parallel_tool_calls":true)"));
    EXPECT_TRUE(r.has_value()) << choice << ": " << r.err().message;
  }
  // Optional members may be absent or null, and the name may be 64 characters long.
  EXPECT_TRUE(parse_chat_request(with(R"("tools":[{"type":"function","function":{"name":")" + std::string(64, 'a') +
                                      R"(","description":null}}])")).has_value());
  // The named function may come before the tools.
  EXPECT_TRUE(parse_chat_request(with(R"("tool_choice":{"type":"function","function":{"name":"get_weather-2"}},"tools":[)" +
                                      weather_tool + "]")).has_value());
}

TEST(chat_request, names_the_field_of_every_ill_formed_tool) {
  const struct {
    std::string member;
    const char* param;
    bool with_a_tool;  // the body also carries one valid tool
  } cases[] = {
      {R"("tools":"f")", "tools", false},
      {R"("tools":[1])", "tools[0]", false},
      {R"("tools":[{"function":{"name":"f"}}])", "tools[0].type", false},
      {R"("tools":[{"type":"retrieval","function":{"name":"f"}}])", "tools[0].type", false},
      {R"("tools":[{"type":"function"}])", "tools[0].function", false},
      {R"("tools":[{"type":"function","function":"f"}])", "tools[0].function", false},
      {R"("tools":[{"type":"function","function":{}}])", "tools[0].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":7}}])", "tools[0].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":""}}])", "tools[0].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":"get weather"}}])", "tools[0].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":"f.g"}}])", "tools[0].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":")" + std::string(65, 'a') + R"("}}])", "tools[0].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":"f","description":5}}])", "tools[0].function.description", false},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}])", "tools[0].function.parameters", false},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])", "tools[0].function.parameters", false},
      {R"("tools":[{"type":"function","function":{"name":"f","strict":"yes"}}])", "tools[0].function.strict", false},
      {R"("tools":[)" + weather_tool + R"(,{"type":"function","function":{"name":1}}])", "tools[1].function.name", false},
      {R"("tool_choice":3)", "tool_choice", true},
      {R"("tool_choice":"sometimes")", "tool_choice", true},
      {R"("tool_choice":[])", "tool_choice", true},
      {R"("tool_choice":{"function":{"name":"get_weather-2"}})", "tool_choice.type", true},
      {R"("tool_choice":{"type":"tool","function":{"name":"get_weather-2"}})", "tool_choice.type", true},
      {R"("tool_choice":{"type":"function"})", "tool_choice.function", true},
      {R"("tool_choice":{"type":"function","function":{}})", "tool_choice.function.name", true},
      {R"("tool_choice":{"type":"function","function":{"name":false}})", "tool_choice.function.name", true},
      {R"("tool_choice":{"type":"function","function":{"name":"elsewhere"}})", "tool_choice.function.name", true},
      // A named function needs tools that hold it.
      {R"("tool_choice":{"type":"function","function":{"name":"get_weather-2"}})", "tool_choice.function.name", false},
      {R"("parallel_tool_calls":"yes")", "parallel_tool_calls", true},
      {R"("tools":[)" + weather_tool + "," + weather_tool + "]", "tools[1].function.name", false},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}])", "tools[0].function.parameters", false},
      {R"("tool_choice":"required")", "tool_choice", false},
      {R"("tool_choice":"required","tools":[])", "tool_choice", false},
      {R"("chat_template_kwargs":[])", "chat_template_kwargs", true},
      {R"("chat_template_kwargs":{"messages":[]})", "chat_template_kwargs", true},
      {R"("reasoning_effort":"extreme")", "reasoning_effort", true},
      {R"("reasoning_effort":1)", "reasoning_effort", true},
  };
  for (const auto& c : cases) {
    auto e = error_of(with(c.with_a_tool ? c.member + R"(,"tools":[)" + weather_tool + "]" : c.member));
    EXPECT_EQ(e.status, 400) << c.member;
    EXPECT_EQ(e.type, "invalid_request_error") << c.member;
    EXPECT_EQ(e.param, c.param) << c.member;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << c.member << ": " << e.message;
  }
}

struct range_case {
  const char* member;
  const char* param;
};

TEST(chat_request, names_the_parameter_of_every_type_and_range_error) {
  const range_case cases[] = {
      {R"("temperature":"hot")", "temperature"},  {R"("temperature":2.5)", "temperature"},
      {R"("temperature":-0.1)", "temperature"},   {R"("top_p":0)", "top_p"},
      {R"("top_p":1.01)", "top_p"},               {R"("top_p":true)", "top_p"},
      {R"("top_k":-1)", "top_k"},                 {R"("top_k":1.5)", "top_k"},
      {R"("min_p":1.5)", "min_p"},                {R"("presence_penalty":-2.5)", "presence_penalty"},
      {R"("frequency_penalty":3)", "frequency_penalty"}, {R"("repetition_penalty":0)", "repetition_penalty"},
      {R"("seed":"1")", "seed"},                  {R"("seed":1.5)", "seed"},
      {R"("n":0)", "n"},                          {R"("n":17)", "n"},
      {R"("max_tokens":0)", "max_tokens"},        {R"("max_tokens":"5")", "max_tokens"},
      {R"("max_completion_tokens":-1)", "max_completion_tokens"},
      {R"("logprobs":1)", "logprobs"},            {R"("top_logprobs":21)", "top_logprobs"},
      {R"("top_logprobs":2)", "top_logprobs"},    {R"("stop":5)", "stop"},
      {R"("stop":["a","b","c","d","e"])", "stop"}, {R"("stop":[""])", "stop"},
      {R"("stop":[1])", "stop"},                  {R"("stop":"")", "stop"},
      {R"("logit_bias":{"x":1})", "logit_bias"},  {R"("logit_bias":{"5":101})", "logit_bias"},
      {R"("logit_bias":{"-1":1})", "logit_bias"}, {R"("logit_bias":[])", "logit_bias"},
      {R"("user":1)", "user"},                    {R"("ignore_eos":"yes")", "ignore_eos"},
      {R"("kv_bits":5)", "kv_bits"},              {R"("kv_bits":"8")", "kv_bits"},
      {R"("response_format":{"type":"xml"})", "response_format"},
      {R"("response_format":"text")", "response_format"}, {R"("stream":1)", "stream"},
      {R"("stream_options":{"include_usage":"y"})", "stream_options.include_usage"},
      {R"("model":7)", "model"},                  {R"("parallel_tool_calls":0)", "parallel_tool_calls"},
  };
  for (const auto& c : cases) {
    auto e = error_of(with(c.member));
    EXPECT_EQ(e.status, 400) << c.member;
    EXPECT_EQ(e.type, "invalid_request_error") << c.member;
    EXPECT_EQ(e.param, c.param) << c.member;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << c.member << ": " << e.message;
  }
}

TEST(chat_request, gives_kv_bits_errors_their_own_code) {
  EXPECT_EQ(error_of(with(R"("kv_bits":12)")).code, "invalid_kv_bits");
  for (int bits : {4, 8, 16}) {
    auto r = parse_chat_request(with("\"kv_bits\":" + std::to_string(bits)));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->sampling.kv_bits, bits);
  }
}

TEST(chat_request, states_the_range_in_range_errors) {
  EXPECT_EQ(error_of(with(R"("temperature":3)")).message, "temperature must be in [0, 2], got 3");
  EXPECT_EQ(error_of(with(R"("top_p":0)")).message, "top_p must be in (0, 1], got 0");
  EXPECT_EQ(error_of(with(R"("n":99)")).message, "n must be in [1, 16], got 99");
}

TEST(chat_request, accepts_boundaries_nulls_and_integral_floats) {
  auto r = parse_chat_request(with(R"("temperature":2,"top_p":1,"min_p":0,"presence_penalty":-2,"frequency_penalty":2,"top_k":0,"n":16,"max_tokens":3.0,"seed":9223372036854775807,"stop":null,"logit_bias":{"15":-100,"7":100.0},"response_format":{"type":"text"},"user":"u","logprobs":true,"top_logprobs":20,"ignore_eos":true)"));
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(r->sampling.max_tokens, 3);
  EXPECT_EQ(r->sampling.seed, INT64_MAX);
  EXPECT_EQ(r->sampling.sampler.top_logprobs, 20);
  EXPECT_TRUE(r->sampling.ignore_eos);
  ASSERT_EQ(r->sampling.sampler.logit_bias.size(), 2u);
  EXPECT_EQ(r->sampling.sampler.logit_bias[0].first, 15);
  EXPECT_DOUBLE_EQ(r->sampling.sampler.logit_bias[0].second, -100);
  auto nulls = parse_chat_request(with(R"("temperature":null,"max_tokens":null,"seed":null,"tools":null)"));
  ASSERT_TRUE(nulls.has_value());
  EXPECT_DOUBLE_EQ(nulls->sampling.sampler.temperature, 1.0);
  EXPECT_FALSE(nulls->sampling.max_tokens);
}

TEST(chat_request, accepts_a_single_stop_string) {
  auto r = parse_chat_request(with(R"("stop":"\n\n")"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sampling.stop, std::vector<std::string>{"\n\n"});
}

TEST(chat_request, lets_max_completion_tokens_win_over_max_tokens_in_either_order) {
  EXPECT_EQ(parse_chat_request(with(R"("max_tokens":5,"max_completion_tokens":9)"))->sampling.max_tokens, 9);
  EXPECT_EQ(parse_chat_request(with(R"("max_completion_tokens":9,"max_tokens":5)"))->sampling.max_tokens, 9);
}

TEST(chat_request, keeps_the_last_value_of_a_duplicate_key) {
  auto r = parse_chat_request(with(R"("temperature":0.1,"temperature":0.7)"));
  ASSERT_TRUE(r.has_value());
  EXPECT_FLOAT_EQ(r->sampling.sampler.temperature, 0.7f);
  // Each occurrence is validated, so a bad first one is still an error.
  EXPECT_EQ(error_of(with(R"("temperature":9,"temperature":0.7)")).param, "temperature");
}

TEST(chat_request, ignores_unknown_members_of_any_shape) {
  auto r = parse_chat_request(with(R"("new_feature":{"a":[1,2,{"b":null}]},"metadata":{"k":"v"},"store":false,"service_tier":"auto")"));
  EXPECT_TRUE(r.has_value());
}

TEST(chat_request, refuses_malformed_json_with_a_parse_error) {
  const char* bodies[] = {"", " ", "{", "}", "[]", "null", "42", "\"s\"", "{\"messages\":}", "{\"a\":1,}",
                          "{\"a\" 1}", "{'a':1}", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":01}", "{\"a\":1.}",
                          "{\"a\":\"\\q\"}", "{\"a\":1} x", "{\"a\":1}}", "{\"a\":[1,2}", "{\"a\":\"unterminated}",
                          "{\"x\":[1,,2]}", "{\"x\":-}", "\xEF\xBB\xBF{}"};
  for (const char* b : bodies) {
    auto e = error_of(b);
    EXPECT_EQ(e.status, 400) << b;
    EXPECT_EQ(e.type, "invalid_request_error") << b;
  }
  EXPECT_NE(error_of("{\"a\":tru}").message.find("could not parse the JSON body"), std::string::npos);
  EXPECT_EQ(error_of("[1]").message, "the request body must be a JSON object");
}

TEST(chat_request, fails_cleanly_at_every_truncation_of_a_valid_body) {
  for (std::size_t n = 0; n < valid_body.size(); ++n) {
    auto r = parse_chat_request(std::string_view(valid_body).substr(0, n));
    EXPECT_FALSE(r.has_value()) << n;
    if (!r) {
      EXPECT_EQ(r.err().status, 400);
    }
  }
}

TEST(chat_request, refuses_deep_nesting_without_overflowing_the_stack) {
  for (std::string key : {"unknown", "tools", "messages"}) {
    std::string body = "{\"" + key + "\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
    auto r = parse_chat_request(body);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.err().status, 400);
  }
  std::string objects = "{\"x\":";
  for (int i = 0; i < 10000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(10001, '}');
  EXPECT_FALSE(parse_chat_request(objects).has_value());
  // Nesting within the limit is fine.
  EXPECT_TRUE(parse_chat_request(with("\"x\":" + std::string(100, '[') + std::string(100, ']'))).has_value());
}

TEST(chat_request, handles_huge_numbers) {
  EXPECT_EQ(error_of(with(R"("temperature":1e400)")).param, "temperature");
  EXPECT_EQ(error_of(with(R"("seed":99999999999999999999999)")).param, "seed");
  EXPECT_EQ(error_of(with(R"("max_tokens":1e300)")).param, "max_tokens");
  EXPECT_EQ(error_of(with(R"("n":-99999999999999999999999)")).param, "n");
  // An unused member only has to be well-formed JSON: a number too large for a double is refused
  // or accepted, but never a crash.
  (void)parse_chat_request(with(R"("unused":1e400)"));
  EXPECT_TRUE(parse_chat_request(with(R"("unused":123456789012345678901234567890)")).has_value());
}

TEST(chat_request, refuses_invalid_utf8_anywhere) {
  for (std::string bad : {"\xC3", "\xFF", "\xED\xA0\x80", "\xC0\xAF", "a\xF4\x90\x80\x80"}) {
    auto e = error_of(R"({"messages":[{"role":"user","content":")" + bad + R"("}]})");
    EXPECT_EQ(e.status, 400);
    EXPECT_FALSE(parse_chat_request(with("\"junk\":\"" + bad + "\"")).has_value());
  }
  auto ok = parse_chat_request(R"({"messages":[{"role":"user","content":"h\u00e9 \ud83d\ude00 日本"}]})");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->messages[0].content, "h\xC3\xA9 \xF0\x9F\x98\x80 日本");
}

TEST(chat_request, refuses_a_body_over_the_size_limit_with_413) {
  parse_limits small;
  small.max_body_bytes = 16;
  auto r = parse_chat_request(valid_body, small);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.err().status, 413);
}

TEST(chat_request, survives_random_corruption_of_a_valid_body) {
  std::mt19937 rng(test_seed());
  for (int i = 0; i < 3000; ++i) {
    std::string b = valid_body;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) b[rng() % b.size()] = static_cast<char>(rng() % 256);
    auto r = parse_chat_request(b);
    if (!r) {
      EXPECT_EQ(r.err().status, 400) << b;
    }
  }
}

TEST(chat_request, reads_a_request_chat_template_and_how_the_conversation_ends) {
  auto plain = parse_chat_request(with(R"("stream":false)"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->chat_template, "");
  EXPECT_FALSE(plain->add_generation_prompt.has_value());
  EXPECT_FALSE(plain->continue_final_message.has_value());
  auto r = parse_chat_request(with(R"("chat_template":"{{ messages[0].content }}","add_generation_prompt":false,"continue_final_message":true)"));
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(r->chat_template, "{{ messages[0].content }}");
  EXPECT_EQ(r->add_generation_prompt, false);
  EXPECT_EQ(r->continue_final_message, true);
  EXPECT_EQ(error_of(with(R"("chat_template":5)")).param, "chat_template");
  EXPECT_EQ(error_of(with(R"("continue_final_message":"yes")")).param, "continue_final_message");
}

TEST(chat_request, gives_chat_template_kwargs_and_reasoning_effort_to_the_template) {
  auto r = parse_chat_request(with(R"("reasoning_effort":"low","chat_template_kwargs":{"enable_thinking":false,"x":[1]})"));
  ASSERT_TRUE(r.has_value()) << r.err().message;
  EXPECT_EQ(r->template_kwargs.at("reasoning_effort").as_string(), "low");
  EXPECT_EQ(r->template_kwargs.at("enable_thinking").as_bool(), false);
  EXPECT_EQ(r->template_kwargs.at("x").as_array().size(), 1u);
  // A kwarg of the same name wins, as it is the template's own variable.
  auto k = parse_chat_request(with(R"("chat_template_kwargs":{"reasoning_effort":"high"},"reasoning_effort":"low")"));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->template_kwargs.at("reasoning_effort").as_string(), "high");
  auto none = parse_chat_request(with(R"("chat_template_kwargs":null,"reasoning_effort":null)"));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->template_kwargs.empty());
}

}  // namespace
}  // namespace strata::api::schema
