// upstream: the router's client side against a real server on loopback: a streamed response read
// piece by piece to its end, a stream its producer cuts reaching the client cut, and a refused
// connection failing before any response.

#include "io/upstream.hpp"

#include <future>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

#include "io/loopback.test.hpp"

namespace strata::io {
namespace {

using namespace testing;

/// Runs `fn` (a coroutine taking the executor) on a client context of its own and returns its result.
template <class F>
auto run_client(F fn) {
  net::io_context ctx;
  auto fut = net::co_spawn(ctx, fn(ctx.get_executor()), net::use_future);
  ctx.run_for(30s);
  return fut.get();
}

/// Streams "a", "b", "c" as three parts, then ends cleanly or (`cut`) aborts.
request_handler three_parts(bool cut) {
  return [cut](http_request& req, const request_context& ctx) -> handler_result {
    auto queue = reply_queue::create(ctx.executor);
    auto out = queue->address();
    for (const char* s : {"a", "b", "c"}) out.send({s});
    if (cut) {
      reply_part abort;
      abort.abort = true;
      out.send(std::move(abort));
    }
    out.close();
    http_response head{http::status::ok, req.version()};
    head.set(http::field::content_type, "text/event-stream");
    return stream_reply{std::move(head), queue};
  };
}

struct read_result {
  beast::error_code start, end;
  bool chunked = false, done = false;
  std::string body;
};

read_result read_all(std::uint16_t port) {
  return run_client([port](net::any_io_executor ex) -> net::awaitable<read_result> {
    read_result r;
    upstream_call call(ex);
    // Named, not temporaries in the co_await: GCC 12 destroys such temporaries twice.
    const upstream_address to{"127.0.0.1", std::to_string(port)};
    http_request req{http::verb::post, "/s", 11};
    r.start = co_await call.start(to, std::move(req), 5s, 5s);
    if (r.start) co_return r;
    r.chunked = call.chunked();
    std::string piece;
    for (;;) {
      r.end = co_await call.read_some(piece, 5s);
      if (r.end || piece.empty()) break;
      r.body += piece;
    }
    r.done = call.done();
    co_return r;
  });
}

TEST(upstream, parses_only_http_urls_with_a_host_and_a_valid_port) {
  auto a = parse_http_url("http://10.0.0.2:8080/");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "10.0.0.2");
  EXPECT_EQ(a->port, "8080");
  EXPECT_EQ(parse_http_url("http://replica")->port, "80");
  for (const char* bad : {"https://a:1", "http://", "http://a:0", "http://a:70000", "http://a:1/v1", "a:1", "http://:80"})
    EXPECT_FALSE(parse_http_url(bad)) << bad;
}

TEST(upstream, reads_a_streamed_response_piece_by_piece_to_its_end) {
  loopback_server s({}, three_parts(false));
  auto r = read_all(s.port());
  ASSERT_FALSE(r.start) << r.start.message();
  EXPECT_TRUE(r.chunked);
  EXPECT_FALSE(r.end) << r.end.message();
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.body, "abc");
}

TEST(upstream, a_stream_its_producer_aborts_reaches_the_client_cut_not_complete) {
  loopback_server s({}, three_parts(true));
  auto r = read_all(s.port());
  ASSERT_FALSE(r.start) << r.start.message();
  EXPECT_TRUE(r.end) << "the body must not end cleanly";
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.body, "abc");
}

TEST(upstream, a_refused_connection_fails_before_any_response) {
  std::uint16_t port = 0;
  {
    net::io_context ctx;
    tcp::acceptor a(ctx, {net::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  auto r = read_all(port);
  EXPECT_TRUE(r.start);
}

}  // namespace
}  // namespace strata::io
