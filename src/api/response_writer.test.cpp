#include "src/api/response_writer.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include "src/api/json_writer.hpp"
#include "src/api/stream_framing.hpp"
#include "src/common/utf8.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;

const response_head head{"chatcmpl-abc", 1700000000, "qwen", "fp_1"};

json::object parsed(const std::string& s) {
  json::error_code ec;
  json::value v = json::parse(s, ec);
  EXPECT_FALSE(ec) << s;
  return ec ? json::object{} : v.as_object();
}

TEST(response_writer, writes_a_chat_completion_field_by_field) {
  chat_choice c;
  c.content = "hi \"there\"";
  c.finish_reason = "length";
  auto o = parsed(write_chat_completion(head, {c}, {10, 3, 4}));
  EXPECT_EQ(o.at("id").as_string(), "chatcmpl-abc");
  EXPECT_EQ(o.at("object").as_string(), "chat.completion");
  EXPECT_EQ(o.at("created").as_int64(), 1700000000);
  EXPECT_EQ(o.at("model").as_string(), "qwen");
  EXPECT_EQ(o.at("system_fingerprint").as_string(), "fp_1");
  const auto& ch = o.at("choices").as_array().at(0).as_object();
  EXPECT_EQ(ch.at("index").as_int64(), 0);
  EXPECT_EQ(ch.at("message").at("role").as_string(), "assistant");
  EXPECT_EQ(ch.at("message").at("content").as_string(), "hi \"there\"");
  EXPECT_TRUE(ch.at("logprobs").is_null());
  EXPECT_EQ(ch.at("finish_reason").as_string(), "length");
  const auto& u = o.at("usage").as_object();
  EXPECT_EQ(u.at("prompt_tokens").as_int64(), 10);
  EXPECT_EQ(u.at("completion_tokens").as_int64(), 3);
  EXPECT_EQ(u.at("total_tokens").as_int64(), 13);
  EXPECT_EQ(u.at("prompt_tokens_details").at("cached_tokens").as_int64(), 4);
}

TEST(response_writer, splits_the_cached_tokens_by_tier_in_strata_cached_tokens) {
  auto o = parsed(write_chat_completion(head, {chat_choice{}}, {100, 3, 70, 64}));
  const auto& u = o.at("usage").as_object();
  EXPECT_EQ(u.at("prompt_tokens_details").at("cached_tokens").as_int64(), 70);
  EXPECT_EQ(u.at("strata_cached_tokens").at("ram").as_int64(), 6);
  EXPECT_EQ(u.at("strata_cached_tokens").at("ssd").as_int64(), 64);
  EXPECT_EQ(u.at("strata_cached_tokens").at("host").as_int64(), 0);
  usage_counts counts{100, 3, 70, 16};
  counts.host_cached_tokens = 48;
  auto h = parsed(write_chat_completion(head, {chat_choice{}}, counts)).at("usage").as_object();
  EXPECT_EQ(h.at("strata_cached_tokens").at("ram").as_int64(), 6);
  EXPECT_EQ(h.at("strata_cached_tokens").at("ssd").as_int64(), 16);
  EXPECT_EQ(h.at("strata_cached_tokens").at("host").as_int64(), 48);
}

TEST(response_writer, writes_the_three_kinds_of_chat_chunk_and_the_usage_chunk) {
  EXPECT_EQ(write_chat_role_chunk(head, 0, false),
            R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,"model":"qwen","system_fingerprint":"fp_1",)"
            R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})");
  auto c = parsed(write_chat_content_chunk(head, 1, "tok", nullptr, true));
  EXPECT_EQ(c.at("choices").at(0).at("delta").at("content").as_string(), "tok");
  EXPECT_EQ(c.at("choices").at(0).at("index").as_int64(), 1);
  EXPECT_TRUE(c.at("usage").is_null());
  auto f = parsed(write_chat_finish_chunk(head, 0, "stop", true));
  EXPECT_TRUE(f.at("choices").at(0).at("delta").as_object().empty());
  EXPECT_EQ(f.at("choices").at(0).at("finish_reason").as_string(), "stop");
  auto u = parsed(write_chat_usage_chunk(head, {5, 2, 0}));
  EXPECT_TRUE(u.at("choices").as_array().empty());
  EXPECT_EQ(u.at("usage").at("total_tokens").as_int64(), 7);
  EXPECT_FALSE(parsed(write_chat_role_chunk(head, 0, false)).contains("usage"));
}

TEST(response_writer, writes_chat_logprobs_with_bytes_and_alternatives) {
  std::vector<token_logprob> lps{{"\xC3\xA9", -0.25, {{"\xC3\xA9", -0.25}, {"e", -1.5}}},
                                 {"\xE2\x80", -std::numeric_limits<double>::infinity(), {}}};
  auto c = parsed(write_chat_content_chunk(head, 0, "\xC3\xA9", &lps, false));
  const auto& content = c.at("choices").at(0).at("logprobs").at("content").as_array();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0].at("token").as_string(), "\xC3\xA9");
  EXPECT_DOUBLE_EQ(content[0].at("logprob").to_number<double>(), -0.25);
  EXPECT_EQ(content[0].at("bytes").as_array(), (json::array{195, 169}));
  EXPECT_EQ(content[0].at("top_logprobs").at(1).at("token").as_string(), "e");
  EXPECT_EQ(content[1].at("token").as_string(), "bytes:\\xe2\\x80");
  EXPECT_DOUBLE_EQ(content[1].at("logprob").to_number<double>(), -9999.0);
  EXPECT_EQ(content[1].at("bytes").as_array(), (json::array{226, 128}));
}

TEST(response_writer, writes_text_completions_and_their_logprobs) {
  text_choice t;
  t.text = "ab";
  t.has_logprobs = true;
  t.logprobs = {{"a", -0.5, {{"a", -0.5}, {"b", -2}}}, {"b", -0.1, {}}};
  t.text_offset_start = 4;
  auto o = parsed(write_text_completion(response_head{"cmpl-1", 1, "m", ""}, {t}, {1, 2, 0}));
  EXPECT_EQ(o.at("object").as_string(), "text_completion");
  EXPECT_TRUE(o.at("system_fingerprint").is_null());
  const auto& ch = o.at("choices").at(0).as_object();
  EXPECT_EQ(ch.at("text").as_string(), "ab");
  const auto& lp = ch.at("logprobs").as_object();
  EXPECT_EQ(lp.at("tokens"), (json::array{"a", "b"}));
  EXPECT_EQ(lp.at("text_offset"), (json::array{4, 5}));
  EXPECT_DOUBLE_EQ(lp.at("top_logprobs").at(0).at("b").to_number<double>(), -2);
  EXPECT_DOUBLE_EQ(lp.at("token_logprobs").at(1).to_number<double>(), -0.1);
  EXPECT_FALSE(ch.contains("token_ids"));
  t.token_ids = std::vector<std::int32_t>{7, 9};
  auto with_ids = parsed(write_text_completion(response_head{"cmpl-1", 1, "m", ""}, {t}, {1, 2, 0}));
  EXPECT_EQ(with_ids.at("choices").at(0).at("token_ids"), (json::array{7, 9}));
  auto chunk = parsed(write_text_chunk(head, 0, "x", nullptr, 0, std::string_view("stop"), true));
  EXPECT_EQ(chunk.at("choices").at(0).at("finish_reason").as_string(), "stop");
  EXPECT_TRUE(chunk.at("usage").is_null());
  EXPECT_TRUE(parsed(write_text_usage_chunk(head, {1, 1, 1})).at("choices").as_array().empty());
}

TEST(response_writer, writes_models_tokenize_detokenize_and_errors) {
  auto m = parsed(write_models({{"a", 5}, {"b", 6}}));
  EXPECT_EQ(m.at("object").as_string(), "list");
  EXPECT_EQ(m.at("data").at(1).at("id").as_string(), "b");
  EXPECT_EQ(m.at("data").at(1).at("owned_by").as_string(), "strata");
  EXPECT_EQ(m.at("data").at(0).at("object").as_string(), "model");
  EXPECT_EQ(write_tokenize({1, 2}), R"({"tokens":[1,2]})");
  EXPECT_EQ(write_tokenize_pieces({1, 2}, {"hi", "\xFF"}), R"({"tokens":[{"id":1,"piece":"hi"},{"id":2,"piece":[255]}]})");
  EXPECT_EQ(write_detokenize("a\nb"), R"({"content":"a\nb"})");
  EXPECT_EQ(write_error(invalid_request("n", "n must be in [1, 16], got 0")),
            R"({"error":{"message":"n must be in [1, 16], got 0","type":"invalid_request_error","param":"n","code":null}})");
}

TEST(json_writer, escapes_control_characters_and_keeps_non_ascii) {
  std::string all;
  for (int c = 0; c < 0x20; ++c) all += static_cast<char>(c);
  all += "\"\\/\x7F h\xC3\xA9 \xF0\x9F\x98\x80";
  json_writer w;
  w.string(all);
  std::string out = w.take();
  for (char c : out) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
  EXPECT_NE(out.find("\\u0001"), std::string::npos);
  EXPECT_NE(out.find("\\n"), std::string::npos);
  EXPECT_EQ(json::parse(out).as_string(), all);
}

TEST(json_writer, replaces_invalid_utf8_so_output_stays_valid) {
  json_writer w;
  w.string("a\xFF" "b\xC3");
  std::string out = w.take();
  EXPECT_EQ(out, "\"a\xEF\xBF\xBD" "b\xEF\xBF\xBD\"");
  EXPECT_TRUE(utf8::is_valid(out));
}

TEST(stream_framing, frames_sse_and_websocket_messages) {
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_keep_alive(), ": keep-alive\n\n");
  EXPECT_EQ(ws_chunk_frame("\"r1\"", "{\"a\":1}"), R"({"type":"chunk","id":"r1","data":{"a":1}})");
  EXPECT_EQ(ws_done_frame("1.50"), R"({"type":"done","id":1.50})");
  auto e = parsed(ws_error_frame("", invalid_request("body", "body is required")));
  EXPECT_TRUE(e.at("id").is_null());
  EXPECT_EQ(e.at("error").at("param").as_string(), "body");
  EXPECT_EQ(e.at("type").as_string(), "error");
}

TEST(response_writer, writes_tool_calls_with_null_content_and_reasoning) {
  chat_choice c;
  c.reasoning = "think";
  c.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris"})"});
  c.finish_reason = "tool_calls";
  auto o = parsed(write_chat_completion(head, {c}, {}));
  const auto& m = o.at("choices").as_array().at(0).at("message").as_object();
  EXPECT_TRUE(m.at("content").is_null());
  EXPECT_EQ(m.at("reasoning_content").as_string(), "think");
  const auto& call = m.at("tool_calls").as_array().at(0).as_object();
  EXPECT_EQ(call.at("id").as_string(), "call_1");
  EXPECT_EQ(call.at("type").as_string(), "function");
  EXPECT_EQ(call.at("function").at("name").as_string(), "get_weather");
  EXPECT_EQ(call.at("function").at("arguments").as_string(), R"({"city":"Paris"})");
  // Without calls or reasoning the message is as before: content a string, no extra members.
  auto plain = parsed(write_chat_completion(head, {chat_choice{}}, {}));
  const auto& pm = plain.at("choices").as_array().at(0).at("message").as_object();
  EXPECT_EQ(pm.at("content").as_string(), "");
  EXPECT_FALSE(pm.contains("tool_calls"));
  EXPECT_FALSE(pm.contains("reasoning_content"));
}

TEST(response_writer, writes_tool_call_and_reasoning_deltas_as_openai_streams_them) {
  auto start = parsed(write_chat_tool_call_start_chunk(head, 1, 2, {"call_9", "f", "{}"}, false));
  const auto& ch = start.at("choices").as_array().at(0).as_object();
  EXPECT_EQ(ch.at("index").as_int64(), 1);
  const auto& tc = ch.at("delta").at("tool_calls").as_array().at(0).as_object();
  EXPECT_EQ(tc.at("index").as_int64(), 2);
  EXPECT_EQ(tc.at("id").as_string(), "call_9");
  EXPECT_EQ(tc.at("type").as_string(), "function");
  EXPECT_EQ(tc.at("function").at("name").as_string(), "f");
  EXPECT_EQ(tc.at("function").at("arguments").as_string(), "");
  auto args = parsed(write_chat_tool_call_arguments_chunk(head, 1, 2, R"({"a":1})", true));
  const auto& ac = args.at("choices").as_array().at(0).at("delta").at("tool_calls").as_array().at(0).as_object();
  EXPECT_EQ(ac.at("index").as_int64(), 2);
  EXPECT_FALSE(ac.contains("id"));
  EXPECT_EQ(ac.at("function").at("arguments").as_string(), R"({"a":1})");
  EXPECT_TRUE(args.at("usage").is_null());
  auto r = parsed(write_chat_reasoning_chunk(head, 0, "hmm", false));
  EXPECT_EQ(r.at("choices").as_array().at(0).at("delta").at("reasoning_content").as_string(), "hmm");
}

}  // namespace
}  // namespace strata::api::schema
