#include "server/api/router.hpp"

#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace strata::api {
namespace {

namespace http = io::http;

/// `auth`: an Authorization header, or "x-api-key: KEY" for that header instead.
io::http_response call(const router& r, http::verb verb, std::string target, std::string auth = {}) {
  io::http_request req{verb, target, 11};
  constexpr std::string_view x_api_key = "x-api-key: ";
  if (auth.starts_with(x_api_key)) {
    req.set("x-api-key", auth.substr(x_api_key.size()));
  } else if (!auth.empty()) {
    req.set(http::field::authorization, auth);
  }
  auto result = r.handle(req, io::request_context{});
  return std::get<io::http_response>(std::move(result));
}

TEST(router, health_is_503_while_loading_and_200_when_ready) {
  server_status st;
  metrics::registry m;
  router r(st, m);
  EXPECT_EQ(call(r, http::verb::get, "/health").result(), http::status::service_unavailable);
  st.ready = true;
  auto res = call(r, http::verb::get, "/health");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.body(), R"({"status":"ok","ssd":"off"})");
}

TEST(router, while_loading_health_gives_the_reason_and_other_routes_answer_503_but_open_and_marked_ones) {
  server_status st;
  st.api_keys = {{"k1"}};
  metrics::registry m;
  router r(st, m);
  auto ok = [](io::http_request& req, const io::request_context&) -> io::handler_result {
    return io::make_json(req.version(), http::status::ok, "{}");
  };
  r.add(http::verb::post, "/v1/chat/completions", ok);
  r.add(http::verb::get, "/admin/api/stats", ok);
  r.answer_while_loading("/admin/api/stats");
  r.add(http::verb::get, "/", ok, access::open);
  st.set_loading("fingerprinting the model", 0.456);
  auto health = call(r, http::verb::get, "/health");
  EXPECT_EQ(health.result(), http::status::service_unavailable);
  EXPECT_EQ(health[http::field::retry_after], "1");
  EXPECT_EQ(health.body(), R"j({"status":"loading","reason":"loading the model: fingerprinting the model (45 %)"})j");
  auto busy = call(r, http::verb::post, "/v1/chat/completions", "Bearer k1");
  EXPECT_EQ(busy.result(), http::status::service_unavailable);
  EXPECT_NE(busy.body().find(R"("code":"loading")"), std::string::npos) << busy.body();
  EXPECT_EQ(call(r, http::verb::post, "/v1/chat/completions").result(), http::status::unauthorized) << "keys first";
  EXPECT_EQ(call(r, http::verb::get, "/admin/api/stats", "Bearer k1").result(), http::status::ok);
  EXPECT_EQ(call(r, http::verb::get, "/").result(), http::status::ok) << "an open page needs no key";
  EXPECT_EQ(call(r, http::verb::get, "/metrics", "Bearer k1").result(), http::status::ok);
  st.ready = true;
  EXPECT_EQ(call(r, http::verb::post, "/v1/chat/completions", "Bearer k1").result(), http::status::ok);
}

TEST(router, health_names_the_ssd_tier_state) {
  server_status st;
  st.ready = true;
  metrics::registry m;
  router r(st, m);
  st.ssd_state = [] { return std::string_view("degraded"); };
  EXPECT_EQ(call(r, http::verb::get, "/health").body(), R"({"status":"ok","ssd":"degraded"})");
}

TEST(router, unknown_paths_are_404_and_wrong_methods_405_with_allow) {
  server_status st;
  st.ready = true;
  metrics::registry m;
  router r(st, m);
  EXPECT_EQ(call(r, http::verb::get, "/nope").result(), http::status::not_found);
  auto res = call(r, http::verb::delete_, "/health?x=1");
  EXPECT_EQ(res.result(), http::status::method_not_allowed);
  EXPECT_EQ(res[http::field::allow], "GET");
}

TEST(router, v1_paths_need_one_of_the_configured_keys) {
  server_status st;
  st.ready = true;
  st.api_keys = {{"sk-first"}, {"sk-second"}};
  st.model_id = "demo";
  metrics::registry m;
  router r(st, m);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models").result(), http::status::unauthorized);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "Bearer sk-wrong").result(), http::status::unauthorized);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "Bearer sk-firs").result(), http::status::unauthorized);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "sk-first").result(), http::status::unauthorized);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "Bearer sk-second").result(), http::status::ok);
  // Anthropic's clients send the key as x-api-key.
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "x-api-key: sk-first").result(), http::status::ok);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "x-api-key: sk-firs").result(), http::status::unauthorized);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models", "x-api-key: ").result(), http::status::unauthorized);
  // Health stays open for probes.
  EXPECT_NE(call(r, http::verb::get, "/health").result(), http::status::unauthorized);
}

TEST(router, every_route_but_health_needs_a_key_when_keys_are_set) {
  server_status st;
  st.ready = true;
  st.api_keys = {{"k1"}};
  metrics::registry m;
  router r(st, m);
  auto ok = [](io::http_request& req, const io::request_context&) -> io::handler_result {
    return io::make_json(req.version(), http::status::ok, "{}");
  };
  r.add(http::verb::post, "/tokenize", ok);
  r.add(http::verb::post, "/detokenize", ok);
  r.add(http::verb::get, "/admin/api/stats", ok);
  r.add(http::verb::post, "/v1/chat/completions", ok);
  const std::pair<http::verb, const char*> routes[] = {
      {http::verb::get, "/metrics"},         {http::verb::get, "/v1/models"},
      {http::verb::post, "/tokenize"},       {http::verb::post, "/detokenize"},
      {http::verb::get, "/admin/api/stats"}, {http::verb::post, "/v1/chat/completions"},
      {http::verb::head, "/metrics"},
  };
  for (const auto& [verb, path] : routes) {
    auto refused = call(r, verb, path);
    EXPECT_EQ(refused.result(), http::status::unauthorized) << path;
    EXPECT_EQ(refused[http::field::www_authenticate], "Bearer") << path;
    EXPECT_EQ(call(r, verb, path, "Bearer k2").result(), http::status::unauthorized) << path;
    EXPECT_EQ(call(r, verb, path, "Bearer k1").result(), http::status::ok) << path;
  }
  EXPECT_EQ(call(r, http::verb::get, "/health").result(), http::status::ok);
  EXPECT_EQ(call(r, http::verb::get, "/health", "Bearer wrong").result(), http::status::ok);
}

TEST(router, the_matched_key_gives_its_name_to_the_log_and_its_salt_to_the_endpoint) {
  server_status st;
  st.ready = true;
  st.api_keys = {{"k-plain"}, {"k-a", "team-a", "salt-a"}, {"k-b", "", "salt-b"}};
  metrics::registry m;
  router r(st, m);
  std::string seen_salt;
  r.add(http::verb::post, "/v1/completions", [&](io::http_request& req, const io::request_context& ctx) -> io::handler_result {
    seen_salt = ctx.key_salt;
    return io::make_json(req.version(), http::status::ok, "{}");
  });
  auto send = [&](const char* auth) {
    io::http_request req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::authorization, auth);
    std::string key_name;
    io::request_context ctx;
    ctx.key_name = &key_name;
    seen_salt = "unset";
    auto res = std::get<io::http_response>(r.handle(req, ctx));
    EXPECT_EQ(res.result(), http::status::ok) << auth;
    return key_name;
  };
  EXPECT_EQ(send("Bearer k-a"), "team-a");
  EXPECT_EQ(seen_salt, "salt-a");
  EXPECT_EQ(send("Bearer k-b"), "");
  EXPECT_EQ(seen_salt, "salt-b");
  EXPECT_EQ(send("Bearer k-plain"), "");
  EXPECT_EQ(seen_salt, "");
}

TEST(router, metrics_answer_without_a_key_only_when_public) {
  server_status st;
  st.ready = true;
  st.api_keys = {{"k1"}};
  metrics::registry m;
  router r(st, m);
  EXPECT_EQ(call(r, http::verb::get, "/metrics").result(), http::status::unauthorized);
  st.metrics_public = true;
  EXPECT_EQ(call(r, http::verb::get, "/metrics").result(), http::status::ok);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models").result(), http::status::unauthorized);
}

TEST(router, without_keys_every_route_is_open) {
  server_status st;
  st.ready = true;
  metrics::registry m;
  router r(st, m);
  EXPECT_EQ(call(r, http::verb::get, "/metrics").result(), http::status::ok);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models").result(), http::status::ok);
}

TEST(router, models_lists_the_loaded_model) {
  server_status st;
  st.ready = true;
  st.model_id = "tiny \"q\"";
  st.created = 1700000000;
  metrics::registry m;
  router r(st, m);
  EXPECT_EQ(call(r, http::verb::get, "/v1/models").body(),
            R"({"object":"list","data":[{"id":"tiny \"q\"","object":"model","created":1700000000,"owned_by":"strata","device":"cpu"}]})");
}

TEST(router, metrics_render_in_prometheus_text) {
  server_status st;
  st.ready = true;
  metrics::registry m;
  m.make_counter("strata_test_total", "t").inc(2);
  router r(st, m);
  auto res = call(r, http::verb::get, "/metrics");
  EXPECT_EQ(res[http::field::content_type], "text/plain; version=0.0.4");
  EXPECT_NE(res.body().find("strata_test_total 2\n"), std::string::npos);
}

TEST(router, constant_time_equal_compares_exactly) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("abcd", "abc"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal("a", ""));
  EXPECT_TRUE(constant_time_equal("", ""));
  // The secret is walked cyclically over the given string: a repetition of it is still unequal.
  EXPECT_FALSE(constant_time_equal("abcabc", "abc"));
  EXPECT_FALSE(constant_time_equal("xbc", "abc"));
  EXPECT_FALSE(constant_time_equal("abx", "abc"));
  EXPECT_TRUE(constant_time_equal(std::string(300, 'k'), std::string(300, 'k')));
  EXPECT_FALSE(constant_time_equal(std::string(256, 'k') + "a", std::string(256, 'k') + "b"));
}

TEST(router, a_prefix_route_answers_one_more_path_segment_and_exact_routes_come_first) {
  server_status st;
  st.ready = true;
  metrics::registry m;
  router r(st, m);
  std::string seen;
  r.add_prefix(http::verb::get, "/v1/responses/", [&](io::http_request& req, const io::request_context&) -> io::handler_result {
    seen = std::string(req.target());
    return io::http_response{http::status::ok, 11};
  });
  r.add(http::verb::get, "/v1/responses/special", [](io::http_request&, const io::request_context&) -> io::handler_result {
    return io::http_response{http::status::accepted, 11};
  });
  EXPECT_EQ(call(r, http::verb::get, "/v1/responses/resp_1?x=1").result(), http::status::ok);
  EXPECT_EQ(seen, "/v1/responses/resp_1?x=1");
  EXPECT_EQ(call(r, http::verb::get, "/v1/responses/special").result(), http::status::accepted);
  EXPECT_EQ(call(r, http::verb::get, "/v1/responses/").result(), http::status::not_found);
  EXPECT_EQ(call(r, http::verb::get, "/v1/responses/a/b").result(), http::status::not_found);
  EXPECT_EQ(call(r, http::verb::delete_, "/v1/responses/resp_1").result(), http::status::method_not_allowed);
}

}  // namespace
}  // namespace strata::api
