#include <string>

#include <gtest/gtest.h>

#include "src/api/chat_request.hpp"
#include "src/api/completion_request.hpp"
#include "src/api/tokenize_request.hpp"
#include "src/api/ws_envelope.hpp"

namespace strata::api::schema {
namespace {

std::string with(std::string member) { return R"({"model":"m","prompt":"hi",)" + member + "}"; }

TEST(completion_request, accepts_every_prompt_form) {
  auto s = parse_completion_request(R"({"prompt":"once upon"})");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->prompt_texts, (std::vector<std::string>{"once upon"}));
  auto one = parse_completion_request(R"({"prompt":["a time"]})");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->prompt_texts, (std::vector<std::string>{"a time"}));
  auto several = parse_completion_request(R"({"prompt":["a","b",""]})");
  ASSERT_TRUE(several.has_value());
  EXPECT_EQ(several->prompt_texts, (std::vector<std::string>{"a", "b", ""}));
  auto ids = parse_completion_request(R"({"prompt":[1,2,2147483647]})");
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->prompt_tokens, (std::vector<std::vector<std::int32_t>>{{1, 2, 2147483647}}));
  auto lists = parse_completion_request(R"({"prompt":[[1,2],[3]]})");
  ASSERT_TRUE(lists.has_value());
  EXPECT_EQ(lists->prompt_tokens, (std::vector<std::vector<std::int32_t>>{{1, 2}, {3}}));
  EXPECT_TRUE(lists->prompt_texts.empty());
}

TEST(completion_request, refuses_other_prompt_forms) {
  for (const char* body : {R"({"prompt":[]})", R"({"prompt":[1,"a"]})", R"({"prompt":["a",1]})", R"({"prompt":[[1],"a"]})",
                           R"({"prompt":[[1],2]})", R"({"prompt":[[]]})", R"({"prompt":[[1,"a"]]})", R"({"prompt":[-1]})",
                           R"({"prompt":[2147483648]})", R"({"prompt":[1.5]})", R"({"prompt":5})", R"({"prompt":null})",
                           R"({"prompt":[[[1]]]})", R"({"model":"m"})"}) {
    auto r = parse_completion_request(body);
    ASSERT_FALSE(r.has_value()) << body;
    EXPECT_EQ(r.err().param.substr(0, 6), "prompt") << body;
  }
}

TEST(completion_request, refuses_more_prompts_than_the_limit_and_too_many_choices) {
  std::string many = R"({"prompt":[)";
  for (std::size_t i = 0; i <= k_max_prompts; ++i) many += std::string(i ? "," : "") + "\"p\"";
  auto r = parse_completion_request(many + "]}");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.err().param, "prompt");
  auto choices = parse_completion_request(R"({"prompt":[)" + std::string(R"("a",)") + R"("b","c","d","e","f","g","h","i"],"n":16})");
  ASSERT_FALSE(choices.has_value());
  EXPECT_EQ(choices.err().param, "n");
}

TEST(completion_request, takes_echo_and_refuses_a_suffix_clearly) {
  auto echo = parse_completion_request(with(R"("echo":true)"));
  ASSERT_TRUE(echo.has_value());
  EXPECT_TRUE(echo->echo);
  auto plain = parse_completion_request(with(R"("echo":false,"suffix":null)"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->echo);
  auto suffix = parse_completion_request(with(R"("suffix":"end")"));
  ASSERT_FALSE(suffix.has_value());
  EXPECT_EQ(suffix.err().param, "suffix");
}

TEST(completion_request, takes_return_token_ids_without_stream_only) {
  auto ids = parse_completion_request(with(R"("return_token_ids":true)"));
  ASSERT_TRUE(ids.has_value());
  EXPECT_TRUE(ids->return_token_ids);
  EXPECT_FALSE(parse_completion_request(with(R"("echo":true)"))->return_token_ids);
  auto streamed = parse_completion_request(with(R"("return_token_ids":true,"stream":true)"));
  ASSERT_FALSE(streamed.has_value());
  EXPECT_EQ(streamed.err().param, "return_token_ids");
  auto wrong = parse_completion_request(with(R"("return_token_ids":"yes")"));
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.err().param, "return_token_ids");
}

TEST(completion_request, reads_logprobs_as_a_count) {
  auto r = parse_completion_request(with(R"("logprobs":3,"stream":true,"stream_options":{"include_usage":true})"));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->sampling.sampler.logprobs);
  EXPECT_EQ(r->sampling.sampler.top_logprobs, 3);
  EXPECT_TRUE(r->sampling.stream);
  EXPECT_TRUE(r->sampling.include_usage);
  auto zero = parse_completion_request(with(R"("logprobs":0)"));
  ASSERT_TRUE(zero.has_value());
  EXPECT_TRUE(zero->sampling.sampler.logprobs);
  for (const char* bad : {R"("logprobs":6)", R"("logprobs":true)", R"("logprobs":-1)"}) {
    auto e = parse_completion_request(with(bad));
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_EQ(e.err().param, "logprobs");
  }
}

TEST(completion_request, fails_cleanly_at_every_truncation_of_a_valid_body) {
  const std::string body = with(R"("prompt":[5,6,7],"logprobs":2,"stop":"\n","temperature":0,"logit_bias":{"5":-1})");
  ASSERT_TRUE(parse_completion_request(body).has_value());
  for (std::size_t n = 0; n < body.size(); ++n) EXPECT_FALSE(parse_completion_request(body.substr(0, n)).has_value()) << n;
}

TEST(sampling_params, cache_salt_is_a_non_empty_string_on_both_endpoints) {
  auto completion = parse_completion_request(with(R"("cache_salt":"tenant-1")"));
  ASSERT_TRUE(completion.has_value());
  EXPECT_EQ(completion->sampling.cache_salt, "tenant-1");
  auto chat = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"cache_salt":"t"})");
  ASSERT_TRUE(chat.has_value());
  EXPECT_EQ(chat->sampling.cache_salt, "t");
  auto absent = parse_completion_request(with(R"("cache_salt":null)"));
  ASSERT_TRUE(absent.has_value());
  EXPECT_EQ(absent->sampling.cache_salt, "");
  for (const char* bad : {R"("cache_salt":1)", R"("cache_salt":"")", R"("cache_salt":["a"])", R"("cache_salt":{"a":1})", R"("cache_salt":true)"}) {
    auto e = parse_completion_request(with(bad));
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_EQ(e.err().status, 400) << bad;
    EXPECT_EQ(e.err().param, "cache_salt") << bad;
  }
  auto bad_chat = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"cache_salt":5})");
  ASSERT_FALSE(bad_chat.has_value());
  EXPECT_EQ(bad_chat.err().param, "cache_salt");
}

TEST(tokenize_request, reads_llama_cpp_shaped_bodies) {
  auto r = parse_tokenize_request(R"({"content":"hello","add_special":true,"with_pieces":true})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->content, "hello");
  EXPECT_TRUE(r->add_special);
  EXPECT_TRUE(r->parse_special);
  EXPECT_TRUE(r->with_pieces);
  auto p = parse_tokenize_request(R"({"model":"m","prompt":"x","parse_special":false})");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->content, "x");
  EXPECT_FALSE(p->parse_special);
  EXPECT_EQ(parse_tokenize_request(R"({"add_special":true})").err().param, "content");
  EXPECT_EQ(parse_tokenize_request(R"({"content":1})").err().param, "content");
  EXPECT_EQ(parse_tokenize_request(R"({"content":"a","add_special":"no"})").err().param, "add_special");
}

TEST(detokenize_request, reads_token_ids_and_refuses_others) {
  auto r = parse_detokenize_request(R"({"tokens":[0,17,32000]})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->tokens, (std::vector<std::int32_t>{0, 17, 32000}));
  EXPECT_EQ(parse_detokenize_request(R"({})").err().param, "tokens");
  EXPECT_EQ(parse_detokenize_request(R"({"tokens":[1,-2]})").err().param, "tokens[1]");
  EXPECT_EQ(parse_detokenize_request(R"({"tokens":[1,"a"]})").err().param, "tokens[1]");
  EXPECT_EQ(parse_detokenize_request(R"({"tokens":[null]})").err().param, "tokens[0]");
}

TEST(ws_envelope, reads_a_request_and_keeps_the_id_and_body_verbatim) {
  ws_envelope env;
  auto st = parse_ws_envelope(R"({"type":"request","id":"r\u00e9-1" ,"endpoint":"completions","body":{"prompt":"x"}})", env);
  ASSERT_FALSE(st) << st->message;
  EXPECT_EQ(env.type, ws_envelope::kind::request);
  EXPECT_EQ(env.id_json, R"("r\u00e9-1")");
  EXPECT_EQ(env.endpoint, ws_envelope::target::completions);
  EXPECT_EQ(env.body, R"({"prompt":"x"})");
  ASSERT_FALSE(parse_ws_envelope(R"({"body":{"messages":[]},"endpoint":"chat.completions","id":1.50,"type":"request"})", env));
  EXPECT_EQ(env.id_json, "1.50");
  EXPECT_EQ(env.endpoint, ws_envelope::target::chat_completions);
}

TEST(ws_envelope, reads_a_cancel) {
  ws_envelope env;
  ASSERT_FALSE(parse_ws_envelope(R"({"type":"cancel","id":7})", env));
  EXPECT_EQ(env.type, ws_envelope::kind::cancel);
  EXPECT_EQ(env.id_json, "7");
}

TEST(ws_envelope, refuses_bad_envelopes_and_keeps_the_id_for_the_error_frame) {
  ws_envelope env;
  auto st = parse_ws_envelope(R"({"type":"request","id":"a","endpoint":"embeddings","body":{}})", env);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->param, "endpoint");
  EXPECT_EQ(env.id_json, "\"a\"");
  EXPECT_EQ(parse_ws_envelope(R"({"type":"request","id":"a","endpoint":"completions"})", env)->param, "body");
  EXPECT_EQ(parse_ws_envelope(R"({"type":"request","endpoint":"completions","body":{}})", env)->param, "id");
  EXPECT_EQ(parse_ws_envelope(R"({"type":"request","id":[1],"endpoint":"completions","body":{}})", env)->param, "id");
  EXPECT_EQ(parse_ws_envelope(R"({"type":"hello","id":1})", env)->param, "type");
  EXPECT_EQ(parse_ws_envelope(R"({"id":1})", env)->param, "type");
  EXPECT_TRUE(parse_ws_envelope(R"({"type":"cancel","id":1)", env));
}

}  // namespace
}  // namespace strata::api::schema
