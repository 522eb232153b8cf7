// CORS over real connections: which responses name the page's origin, and how preflights are
// answered, with no origin listed, some listed, and "*".

#include <atomic>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "io/cors.hpp"
#include "io/loopback.test.hpp"

namespace strata::io {
namespace {

using testing::loopback_server;
using testing::raw_exchange;
using namespace std::chrono_literals;

/// Counts the requests that reach it; answers 200, or a three-event stream at /stream.
struct counting_handler {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  handler_result operator()(http_request& req, const request_context& rc) const {
    calls->fetch_add(1);
    if (req.target() == "/stream") {
      auto ch = reply_queue::create(rc.executor);
      ch->address().send({"data: 0\n\n"});
      ch->address().close();
      http_response head{http::status::ok, req.version()};
      head.set(http::field::content_type, "text/event-stream");
      return stream_reply{std::move(head), ch};
    }
    return make_json(req.version(), http::status::ok, "{}");
  }
};

http::response<http::string_body> send(const loopback_server& s, const std::string& request_line,
                                       const std::string& fields) {
  auto r = raw_exchange(s.port(), request_line + "\r\nHost: x\r\n" + fields + "\r\n", 0ms);
  EXPECT_TRUE(r.res.has_value()) << request_line;
  return r.res.value_or(http::response<http::string_body>{});
}

std::string preflight_fields(const std::string& origin, const std::string& headers = {}) {
  std::string f = "Origin: " + origin + "\r\nAccess-Control-Request-Method: POST\r\n";
  if (!headers.empty()) f += "Access-Control-Request-Headers: " + headers + "\r\n";
  return f;
}

/// Options that allow one origin, https://app.example.
http_options app_origin_only() {
  http_options o;
  o.cors_origins = {"https://app.example"};
  return o;
}

TEST(cors, with_no_origin_listed_responses_carry_no_cors_headers_and_preflights_get_403) {
  counting_handler h;
  loopback_server s({}, h);
  auto res = send(s, "GET /v1/models HTTP/1.1", "Origin: https://app.example\r\n");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res.count(http::field::access_control_allow_origin), 0u);
  EXPECT_EQ(res.count(http::field::vary), 0u);
  auto pre = send(s, "OPTIONS /v1/chat/completions HTTP/1.1", preflight_fields("https://app.example"));
  EXPECT_EQ(pre.result(), http::status::forbidden);
  EXPECT_EQ(pre.count(http::field::access_control_allow_origin), 0u);
  EXPECT_NE(pre.body().find("origin_not_allowed"), std::string::npos) << pre.body();
  EXPECT_EQ(h.calls->load(), 1) << "a preflight never reaches the endpoints";
}

TEST(cors, a_listed_origin_is_named_in_every_response_to_it) {
  counting_handler h;
  loopback_server s(app_origin_only(), h);
  for (std::string line : {"GET /v1/models HTTP/1.1", "POST /v1/completions HTTP/1.1", "POST /stream HTTP/1.1"}) {
    SCOPED_TRACE(line);
    auto res = send(s, line, "Origin: https://app.example\r\nContent-Length: 0\r\n");
    EXPECT_EQ(res.result(), http::status::ok);
    EXPECT_EQ(res[http::field::access_control_allow_origin], "https://app.example");
    EXPECT_EQ(res[http::field::vary], "Origin");
  }
}

TEST(cors, an_unlisted_origin_or_none_gets_no_cors_headers) {
  counting_handler h;
  loopback_server s(app_origin_only(), h);
  for (std::string fields : {"Origin: https://evil.example\r\n", "Origin: https://app.example.evil\r\n", ""}) {
    SCOPED_TRACE(fields);
    auto res = send(s, "GET /v1/models HTTP/1.1", fields);
    EXPECT_EQ(res.result(), http::status::ok) << "the request is still served; the browser keeps the answer from the page";
    EXPECT_EQ(res.count(http::field::access_control_allow_origin), 0u);
  }
}

TEST(cors, a_preflight_from_a_listed_origin_gets_204_with_the_methods_and_headers) {
  counting_handler h;
  loopback_server s(app_origin_only(), h);
  auto pre = send(s, "OPTIONS /v1/chat/completions HTTP/1.1",
                  preflight_fields("https://app.example", "authorization, content-type, x-stainless-os"));
  EXPECT_EQ(pre.result(), http::status::no_content);
  EXPECT_EQ(pre[http::field::access_control_allow_origin], "https://app.example");
  EXPECT_EQ(pre[http::field::vary], "Origin");
  EXPECT_EQ(pre[http::field::access_control_allow_methods], "GET, POST, OPTIONS");
  EXPECT_EQ(pre[http::field::access_control_allow_headers], "authorization, content-type, x-stainless-os");
  EXPECT_FALSE(pre[http::field::access_control_max_age].empty());
  EXPECT_TRUE(pre.body().empty());

  auto plain = send(s, "OPTIONS /v1/chat/completions HTTP/1.1", preflight_fields("https://app.example"));
  EXPECT_EQ(plain.result(), http::status::no_content);
  EXPECT_EQ(plain[http::field::access_control_allow_headers], "Authorization, Content-Type");
  EXPECT_EQ(h.calls->load(), 0) << "a preflight never reaches the endpoints (nor their API key check)";

  auto other = send(s, "OPTIONS /v1/chat/completions HTTP/1.1", preflight_fields("https://evil.example"));
  EXPECT_EQ(other.result(), http::status::forbidden);
  EXPECT_EQ(other.count(http::field::access_control_allow_origin), 0u);
}

TEST(cors, an_options_request_that_is_no_preflight_goes_to_the_endpoint) {
  counting_handler h;
  loopback_server s(app_origin_only(), h);
  send(s, "OPTIONS /v1/models HTTP/1.1", "Origin: https://app.example\r\n");
  send(s, "OPTIONS /v1/models HTTP/1.1", "Access-Control-Request-Method: POST\r\n");
  EXPECT_EQ(h.calls->load(), 2);
}

TEST(cors, a_star_admits_every_origin_and_names_it) {
  http_options o;
  o.cors_origins = {"*"};
  counting_handler h;
  loopback_server s(o, h);
  auto res = send(s, "GET /v1/models HTTP/1.1", "Origin: https://anywhere.example\r\n");
  EXPECT_EQ(res[http::field::access_control_allow_origin], "https://anywhere.example");
  auto pre = send(s, "OPTIONS /v1/completions HTTP/1.1", preflight_fields("http://localhost:5173"));
  EXPECT_EQ(pre.result(), http::status::no_content);
  EXPECT_EQ(pre[http::field::access_control_allow_origin], "http://localhost:5173");
}

TEST(cors, origins_compare_without_regard_to_case_and_only_whole) {
  std::vector<std::string> allowed{"https://app.example"};
  EXPECT_TRUE(origin_allowed(allowed, "https://APP.example"));
  EXPECT_FALSE(origin_allowed(allowed, "https://app.example.evil"));
  EXPECT_FALSE(origin_allowed(allowed, "https://app.exampl"));
  EXPECT_FALSE(origin_allowed(allowed, ""));
  EXPECT_FALSE(origin_allowed({}, "https://app.example"));
}

}  // namespace
}  // namespace strata::io
