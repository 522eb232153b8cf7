// How the server reads a request's framing (Transfer-Encoding, Content-Length, Host) and frames a
// streamed reply to an HTTP/1.0 client, over real connections with raw requests.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/loopback.test.hpp"

namespace strata::io {
namespace {

using testing::loopback_server;
using testing::raw_exchange;
using testing::raw_in_turn;
using testing::raw_until_close;
using namespace std::chrono_literals;

/// Echoes the body's size; POST /stream answers three SSE events as a stream.
handler_result echo_or_stream(http_request& req, const request_context& rc) {
  if (req.target() == "/stream") {
    auto ch = reply_queue::create(rc.executor);
    for (int i = 0; i < 3; ++i) ch->address().send({"data: " + std::to_string(i) + "\n\n"});
    ch->address().close();
    http_response head{http::status::ok, req.version()};
    head.set(http::field::content_type, "text/event-stream");
    return stream_reply{std::move(head), ch};
  }
  return make_json(req.version(), http::status::ok, "{\"echo\":" + std::to_string(req.body().size()) + "}");
}

struct framing : ::testing::Test {
  loopback_server server{{}, echo_or_stream};

  /// Expects `raw` to be refused with `status` and the connection closed after it.
  void expect_refused(const std::string& raw, http::status status) {
    auto r = raw_exchange(server.port(), raw);
    ASSERT_TRUE(r.res.has_value()) << "no response to:\n" << raw;
    EXPECT_EQ(r.res->result(), status) << raw << "\n" << r.res->body();
    EXPECT_NE(r.res->body().find("\"error\""), std::string::npos) << r.res->body();
    EXPECT_FALSE(r.res->keep_alive()) << raw;
    EXPECT_TRUE(r.closed) << "the connection stays open after:\n" << raw;
  }
  /// Expects `raw` to be served with 200 and the echo of a body of `size` bytes. (The connection
  /// stays open: nothing waits for a close.)
  void expect_served(const std::string& raw, std::size_t size) {
    auto r = raw_exchange(server.port(), raw, 0ms);
    ASSERT_TRUE(r.res.has_value()) << "no response to:\n" << raw;
    EXPECT_EQ(r.res->result(), http::status::ok) << raw << "\n" << r.res->body();
    EXPECT_EQ(r.res->body(), "{\"echo\":" + std::to_string(size) + "}") << raw;
  }
};

const std::string chunked_hello = "5\r\nhello\r\n0\r\n\r\n";

TEST_F(framing, a_transfer_coding_other_than_chunked_gets_501_and_the_connection_closes) {
  for (std::string te : {"gzip", "gzip, chunked", "chunked, gzip", "identity", "chunked;q=1", "chunked, chunked"}) {
    SCOPED_TRACE(te);
    expect_refused("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te + "\r\n\r\n" + chunked_hello,
                   http::status::not_implemented);
  }
}

TEST_F(framing, codings_split_over_two_transfer_encoding_fields_count_as_one_list) {
  expect_refused("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     chunked_hello,
                 http::status::not_implemented);
}

TEST_F(framing, chunked_alone_is_served_in_any_case) {
  expect_served("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_hello, 5);
  expect_served("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n" + chunked_hello, 5);
}

TEST_F(framing, transfer_encoding_with_content_length_gets_400_and_the_connection_closes) {
  expect_refused("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked_hello,
                 http::status::bad_request);
  expect_refused("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_hello,
                 http::status::bad_request);
  expect_refused("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello",
                 http::status::bad_request);
}

TEST_F(framing, transfer_encoding_on_http_1_0_gets_400_and_the_connection_closes) {
  expect_refused("POST /x HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_hello,
                 http::status::bad_request);
  expect_refused("POST /x HTTP/1.0\r\nTransfer-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n" + chunked_hello,
                 http::status::bad_request);
}

TEST_F(framing, an_http_1_1_request_without_host_gets_400) {
  expect_refused("GET /x HTTP/1.1\r\n\r\n", http::status::bad_request);
  expect_refused("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", http::status::bad_request);
}

TEST_F(framing, a_request_with_two_host_fields_gets_400) {
  expect_refused("GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", http::status::bad_request);
  expect_refused("GET /x HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", http::status::bad_request);
}

TEST_F(framing, an_http_1_0_request_needs_no_host) {
  expect_served("POST /x HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello", 5);
}

TEST_F(framing, a_stream_to_an_http_1_0_client_is_not_chunked_and_ends_by_closing) {
  // keep-alive is asked for, but a body without length can only end with the connection.
  auto [received, closed] =
      raw_until_close(server.port(), "POST /stream HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(closed) << received;
  auto end = received.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << received;
  std::string head = received.substr(0, end + 2);
  std::string body = received.substr(end + 4);
  for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_TRUE(head.starts_with("http/1.0 200")) << head;
  EXPECT_EQ(head.find("transfer-encoding"), std::string::npos) << head;
  EXPECT_EQ(head.find("content-length"), std::string::npos) << head;
  EXPECT_EQ(head.find("keep-alive"), std::string::npos) << head;
  EXPECT_EQ(body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST_F(framing, a_stream_to_an_http_1_1_client_stays_chunked) {
  auto replies = raw_in_turn(server.port(), {"POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                                             "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"});
  ASSERT_FALSE(replies.empty());
  EXPECT_TRUE(replies[0].chunked());
  EXPECT_EQ(replies[0].body(), "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  // The next request on the same connection is answered.
  ASSERT_EQ(replies.size(), 2u) << "a chunked stream keeps the connection";
  EXPECT_EQ(replies[1].body(), "{\"echo\":5}");
}

}  // namespace
}  // namespace strata::io
