#include "io/http_server.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <gtest/gtest.h>

#include "io/chunked_request.test.hpp"
#include "io/loopback.test.hpp"

namespace strata::io {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

handler_result echo(http_request& req, const request_context& rc) {
  auto res = make_json(req.version(), http::status::ok, "{\"echo\":" + std::to_string(req.body().size()) + "}");
  res.set("x-remote", rc.remote);
  return res;
}

using testing::chunked_request;

/// The loopback server, answering with echo unless told otherwise.
class running_server : public testing::loopback_server {
 public:
  explicit running_server(http_options opts, request_handler handler = echo)
      : loopback_server(std::move(opts), std::move(handler)) {}
};

struct client {
  net::io_context ctx;
  beast::tcp_stream stream{ctx};
  beast::flat_buffer buffer;
  explicit client(std::uint16_t port) { stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port)); }
  http::response<http::string_body> send(http::verb verb, std::string target, std::string body = {}, bool keep_alive = true) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "localhost");
    req.body() = std::move(body);
    req.keep_alive(keep_alive);
    req.prepare_payload();
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    return res;
  }
  /// True when the server has closed the connection (a read returns EOF).
  bool closed_by_server() {
    beast::error_code ec;
    char c;
    stream.expires_after(5s);
    stream.socket().read_some(net::buffer(&c, 1), ec);
    return ec == net::error::eof || ec == net::error::connection_reset;
  }
};

/// Posts to /stream, reads the response header, and closes the connection: a client that leaves
/// while its stream runs.
void open_stream_and_leave(std::uint16_t port) {
  client c(port);
  http::request<http::string_body> req{http::verb::post, "/stream", 11};
  req.set(http::field::host, "x");
  http::write(c.stream, req);
  http::response_parser<http::string_body> p;
  http::read_header(c.stream, c.buffer, p);
  c.stream.socket().close();
}

TEST(http_server, serves_several_requests_on_one_kept_alive_connection) {
  running_server s({});
  client c(s.port());
  for (int i = 0; i < 5; ++i) {
    auto res = c.send(http::verb::post, "/x", std::string(static_cast<std::size_t>(i) * 10, 'a'));
    EXPECT_EQ(res.result(), http::status::ok);
    EXPECT_EQ(res.body(), "{\"echo\":" + std::to_string(i * 10) + "}");
    EXPECT_TRUE(res.keep_alive());
    EXPECT_FALSE(res["x-request-id"].empty());
  }
  EXPECT_EQ(s.server().connections(), 1u);
}

TEST(http_server, answers_413_to_a_body_over_the_limit_and_closes) {
  http_options o;
  o.max_body = 1000;
  running_server s(o);
  client c(s.port());
  auto res = c.send(http::verb::post, "/x", std::string(5000, 'a'));
  EXPECT_EQ(res.result(), http::status::payload_too_large);
  EXPECT_NE(res.body().find("\"code\":\"body_too_large\""), std::string::npos) << res.body();
  EXPECT_TRUE(c.closed_by_server());
}

TEST(http_server, answers_400_to_a_malformed_request) {
  running_server s({});
  client c(s.port());
  net::write(c.stream, net::buffer(std::string("GARBAGE\x01 / HTTP/9.9\r\n\r\n")));
  http::response<http::string_body> res;
  http::read(c.stream, c.buffer, res);
  EXPECT_EQ(res.result(), http::status::bad_request);
  EXPECT_NE(res.body().find("\"error\""), std::string::npos);
}

TEST(http_server, closes_a_connection_that_sends_no_headers_in_time) {
  http_options o;
  o.header_timeout = 200ms;
  running_server s(o);
  client c(s.port());
  net::write(c.stream, net::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n")));  // never finished
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
}

TEST(http_server, refuses_connections_past_the_limit_with_503) {
  http_options o;
  o.max_connections = 2;
  running_server s(o);
  client a(s.port()), b(s.port());
  EXPECT_EQ(a.send(http::verb::get, "/").result(), http::status::ok);
  EXPECT_EQ(b.send(http::verb::get, "/").result(), http::status::ok);
  client extra(s.port());
  http::response<http::string_body> res;
  http::read(extra.stream, extra.buffer, res);
  EXPECT_EQ(res.result(), http::status::service_unavailable);
  EXPECT_EQ(res[http::field::retry_after], "1");
  // The two admitted connections still work.
  EXPECT_EQ(a.send(http::verb::get, "/").result(), http::status::ok);
}

TEST(http_server, stop_closes_idle_connections_and_refuses_new_ones) {
  running_server s({});
  client c(s.port());
  EXPECT_EQ(c.send(http::verb::get, "/").result(), http::status::ok);
  s.server().stop();
  EXPECT_TRUE(c.closed_by_server());
  // Woken when the connection has ended and the listener has closed.
  EXPECT_TRUE(s.server().wait_idle(5s)) << "still " << s.server().connections() << " connections, or the listener is open";
  EXPECT_EQ(s.server().connections(), 0u);
  net::io_context ctx;
  tcp::socket sock(ctx);
  beast::error_code ec;
  sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port()), ec);
  EXPECT_TRUE(ec) << "the listener should be closed";
}

/// Streams `count` events from a producer thread, `gap` apart (the pace of a slow model);
/// signals a cancel and a producer's first refused send. A producer stops at its first refused
/// send; join() cuts the gaps short and waits for every producer, so that none outlives the
/// server whose strand its channel holds.
struct streaming_handler {
  struct producers {
    std::mutex mu;
    std::vector<std::thread> threads;
    testing::one_shot joining;
  };
  int count;
  std::chrono::milliseconds gap;
  std::chrono::milliseconds keepalive = 100ms;
  std::shared_ptr<testing::one_shot> cancelled = std::make_shared<testing::one_shot>();
  std::shared_ptr<testing::one_shot> refused = std::make_shared<testing::one_shot>();
  std::shared_ptr<producers> running = std::make_shared<producers>();
  handler_result operator()(http_request& req, const request_context& rc) const {
    auto queue = reply_queue::create(rc.executor);
    queue->on_cancel([c = cancelled] { c->set(); });
    // The first part (empty, as an admitted request's may be) lets the head go out.
    queue->address().send({});
    std::lock_guard lock(running->mu);
    running->threads.emplace_back([out = queue->address(), n = count, gap = gap, refused = refused, run = running] {
      for (int i = 0; i < n; ++i) {
        run->joining.wait_for(gap);
        if (!out.send({"data: " + std::to_string(i) + "\n\n"})) {
          refused->set();
          break;
        }
      }
      out.close();
    });
    http_response head{http::status::ok, req.version()};
    head.set(http::field::content_type, "text/event-stream");
    stream_reply sr{std::move(head), queue};
    sr.keepalive = keepalive;
    return sr;
  }
  void join() const {
    running->joining.set();
    std::lock_guard lock(running->mu);
    for (auto& t : running->threads) t.join();
    running->threads.clear();
  }
};

TEST(http_server, streams_events_as_chunks_with_keep_alive_comments_in_the_gaps) {
  streaming_handler h{3, 250ms};
  running_server s({}, h);
  client c(s.port());
  auto res = c.send(http::verb::post, "/stream");
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/event-stream");
  const std::string& body = res.body();
  EXPECT_NE(body.find("data: 0\n\n"), std::string::npos) << body;
  EXPECT_NE(body.find(": keep-alive\n\n"), std::string::npos) << body;
  auto last = body.rfind("data: 2\n\n");
  EXPECT_NE(last, std::string::npos);
  // The connection is kept and serves the next request.
  EXPECT_EQ(c.send(http::verb::get, "/").result(), http::status::ok);
  h.join();
}

TEST(http_server, a_client_that_disconnects_mid_stream_cancels_the_producer) {
  streaming_handler h{200, 10ms};
  running_server s({}, h);
  open_stream_and_leave(s.port());
  EXPECT_TRUE(h.cancelled->wait_for(5s));
  EXPECT_TRUE(h.refused->wait_for(5s)) << "sends after the cancel must be refused";
  h.join();
}

TEST(http_server, a_client_that_leaves_while_a_stream_waits_for_its_first_event_cancels_it_at_once) {
  // Nothing is written for seconds (a request waiting in the queue): only reading the socket can
  // tell that the client has gone.
  streaming_handler h{1, 4s, 10s};
  running_server s({}, h);
  open_stream_and_leave(s.port());
  EXPECT_TRUE(h.cancelled->wait_for(3s)) << "not cancelled before the first event";
  h.join();
}

/// Answers /slow with a deferred response that the test sets (or not); anything else with echo.
/// With `hold` set, a /slow handler returns only once the test lets it (or after 5 s): what the
/// client sends meanwhile is on the socket when the session starts to wait for the answer.
struct deferred_handler {
  struct pending {
    std::mutex mu;
    std::condition_variable added;
    std::vector<std::shared_ptr<reply_queue>> slots;
  };
  std::shared_ptr<pending> made = std::make_shared<pending>();
  std::shared_ptr<std::atomic<int>> cancelled = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<testing::one_shot> cancel_seen = std::make_shared<testing::one_shot>();
  std::shared_ptr<testing::one_shot> hold;
  handler_result operator()(http_request& req, const request_context& rc) const {
    if (req.target() != "/slow") return echo(req, rc);
    auto slot = reply_queue::create(rc.executor);
    slot->on_cancel([c = cancelled, seen = cancel_seen] {
      c->fetch_add(1);
      seen->set();
    });
    {
      std::lock_guard lock(made->mu);
      made->slots.push_back(slot);
    }
    made->added.notify_all();
    if (hold) hold->wait_for(5s);
    return deferred_reply{slot};
  }
  /// The queue of the i-th /slow request, once the handler has made it (null after 5 s). Only its
  /// address may be used from the test's thread.
  std::shared_ptr<reply_queue> slot(std::size_t i) const {
    std::unique_lock lock(made->mu);
    if (!made->added.wait_for(lock, 5s, [&] { return made->slots.size() > i; })) return nullptr;
    return made->slots[i];
  }
  /// Drops the slots: their timers belong to the server's io_context, which they must not outlive.
  void release() const {
    std::lock_guard lock(made->mu);
    made->slots.clear();
  }
};

TEST(http_server, a_client_that_leaves_before_a_deferred_response_cancels_it_at_once) {
  deferred_handler h;
  running_server s({}, h);
  {
    client c(s.port());
    http::request<http::string_body> req{http::verb::post, "/slow", 11};
    req.set(http::field::host, "x");
    http::write(c.stream, req);
    ASSERT_TRUE(h.slot(0));
    c.stream.socket().close();
  }
  // The response would come in ten minutes: the slot must not wait for it.
  EXPECT_TRUE(h.cancel_seen->wait_for(3s)) << "the slot was not cancelled";
  EXPECT_EQ(h.cancelled->load(), 1);
  auto late = h.slot(0)->address();
  // The session lets go of the queue right after the cancel, before its connection ends; then
  // the handler does too, and an answer has nowhere to go.
  ASSERT_TRUE(s.server().wait_idle(5s)) << "the connection did not end";
  h.release();
  EXPECT_FALSE(late.send({"{}", 200})) << "a late answer has nowhere to go";
}

TEST(http_server, a_request_pipelined_behind_a_pending_deferred_response_is_served_after_it) {
  deferred_handler h;
  h.hold = std::make_shared<testing::one_shot>();
  running_server s({}, h);
  client c(s.port());
  net::write(c.stream, net::buffer(std::string("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")));
  auto slot = h.slot(0);
  ASSERT_TRUE(slot);
  // Sent while the first is in its handler: the bytes are on the socket when the session starts
  // to wait for the answer; it reads them then, and keeps them for after the answer.
  net::write(c.stream, net::buffer(std::string("POST /y HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nwxyz")));
  h.hold->set();
  ASSERT_TRUE(slot->address().send({"{\"slow\":1}", 200}));
  for (const char* body : {"{\"slow\":1}", "{\"echo\":4}"}) {
    http::response<http::string_body> res;
    http::read(c.stream, c.buffer, res);
    EXPECT_EQ(res.result(), http::status::ok);
    EXPECT_EQ(res.body(), body);
  }
  EXPECT_EQ(h.cancelled->load(), 0);
  slot.reset();
  h.release();
}

TEST(reply_queue, signals_pressure_past_the_high_watermark_and_relief_below_the_low_one) {
  net::io_context ctx;
  auto queue = reply_queue::create(ctx.get_executor(), 4, 1);
  std::vector<bool> signals;
  queue->on_pressure([&](bool paused) { signals.push_back(paused); });
  auto out = queue->address();
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(out.send({std::to_string(i)}));
  EXPECT_TRUE(signals.empty()) << "parts arrive as messages, on the queue's strand, not in send()";
  ctx.poll();
  ctx.restart();
  EXPECT_EQ(signals, std::vector<bool>{true});
  EXPECT_EQ(queue->queued(), 6u);
  std::vector<std::string> got;
  net::co_spawn(ctx, [&]() -> net::awaitable<void> {
    bool timed_out = false;
    while (auto part = co_await queue->next(1000ms, timed_out)) {
      got.push_back(part->data);
      if (got.size() == 6) queue->cancel();
    }
  }, net::detached);
  ctx.run_for(50ms);
  EXPECT_EQ(got, (std::vector<std::string>{"0", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(signals, (std::vector<bool>{true, false}));
  queue.reset();
  EXPECT_FALSE(out.send({"late"})) << "the queue is gone";
}

TEST(http_server, upgrades_to_a_websocket_that_answers_each_message_through_its_outbox) {
  auto closed = std::make_shared<testing::one_shot>();
  running_server s({}, [closed](http_request& req, const request_context&) -> handler_result {
    if (!beast::websocket::is_upgrade(req)) return make_json(req.version(), http::status::bad_request, "{}");
    websocket_accept accept;
    accept.on_message = [](websocket_message m) {
      m.outbox.send({"got:" + m.text});
      m.outbox.send({"again:" + m.text});
    };
    accept.on_close = [closed] { closed->set(); };
    return accept;
  });
  net::io_context ctx;
  beast::websocket::stream<beast::tcp_stream> ws(ctx);
  beast::get_lowest_layer(ws).connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port()));
  ws.handshake("localhost", "/v1/ws");
  for (std::string m : {"one", "two"}) {
    ws.write(net::buffer(m));
    beast::flat_buffer b;
    ws.read(b);
    EXPECT_EQ(beast::buffers_to_string(b.data()), "got:" + m);
    b.consume(b.size());
    ws.read(b);
    EXPECT_EQ(beast::buffers_to_string(b.data()), "again:" + m);
  }
  ws.binary(true);
  ws.write(net::buffer(std::string("\x01\x02")));
  beast::flat_buffer b;
  ws.read(b);
  EXPECT_NE(beast::buffers_to_string(b.data()).find("binary_frame"), std::string::npos);
  ws.close(beast::websocket::close_code::normal);
  EXPECT_TRUE(closed->wait_for(5s));
}

/// The server's answer to `raw`, read while `raw` is still being written: a server that refuses a
/// request early stops reading it, and a client that only wrote would block. Nothing when the
/// server closed the connection without an answer. The whole exchange has 30 s.
std::optional<http::response<http::string_body>> exchange(std::uint16_t port, const std::string& raw) {
  net::io_context ctx;
  beast::tcp_stream stream = testing::connect_loopback(ctx, port);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  std::optional<beast::error_code> read_ec;
  // The write fails once the server closes; only the answer matters.
  net::async_write(stream, net::buffer(raw), [](beast::error_code, std::size_t) {});
  http::async_read(stream, buffer, res, [&](beast::error_code ec, std::size_t) {
    read_ec = ec;
    stream.cancel();
  });
  ctx.run();
  EXPECT_TRUE(read_ec.has_value());
  EXPECT_NE(read_ec.value_or(beast::error::timeout), beast::error::timeout) << "the server neither answered nor closed";
  if (!read_ec || *read_ec) return std::nullopt;
  return res;
}

bool health_answers_200(std::uint16_t port) {
  client c(port);
  return c.send(http::verb::get, "/health").result() == http::status::ok;
}

constexpr std::size_t nine_mib = 9u << 20;

TEST(http_server, a_9_mib_trailer_is_refused_and_the_server_goes_on) {
  running_server s({});
  auto res = exchange(s.port(), chunked_request("hello", 5, "", "X-Pad: " + std::string(nine_mib, 'a') + "\r\n"));
  if (res) {
    EXPECT_EQ(res->result(), http::status::request_header_fields_too_large) << res->body();
    EXPECT_FALSE(res->keep_alive());
  }
  EXPECT_TRUE(health_answers_200(s.port()));
}

TEST(http_server, a_trailer_field_over_64_kib_is_refused_and_the_server_goes_on) {
  // A field this long is more than Beast's fields container can hold; it throws on insert.
  http_options o;
  o.max_header = 1 << 20;
  running_server s(o);
  auto res = exchange(s.port(), chunked_request("hello", 5, "", "X-Pad: " + std::string(70'000, 'a') + "\r\n"));
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->result(), http::status::bad_request) << res->body();
  EXPECT_TRUE(health_answers_200(s.port()));
}

TEST(http_server, a_header_field_over_64_kib_under_a_large_header_limit_gets_400) {
  http_options o;
  o.max_header = 1 << 20;
  running_server s(o);
  auto res = exchange(s.port(), "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(70'000, 'a') + "\r\n\r\n");
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->result(), http::status::bad_request) << res->body();
  EXPECT_TRUE(health_answers_200(s.port()));
}

TEST(http_server, a_trailer_section_over_the_header_limit_gets_431) {
  running_server s({});
  auto res = exchange(s.port(), chunked_request("hello", 5, "", "X-Pad: " + std::string(20'000, 'a') + "\r\n"));
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->result(), http::status::request_header_fields_too_large) << res->body();
  EXPECT_TRUE(health_answers_200(s.port()));
}

TEST(http_server, a_9_mib_chunk_extension_is_refused_with_413) {
  running_server s({});
  auto res = exchange(s.port(), chunked_request("hello", 5, ";e=" + std::string(nine_mib, 'a'), ""));
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->result(), http::status::payload_too_large) << res->body();
  EXPECT_FALSE(res->keep_alive());
  EXPECT_TRUE(health_answers_200(s.port()));
}

TEST(http_server, trailers_count_against_the_body_limit) {
  http_options o;
  o.max_body = 4096;
  running_server s(o);
  // Field bytes count as name plus value: "x-pad" and the rest of the budget.
  const std::string body(96, 'b');
  const std::size_t room = 4096 - body.size() - 5;
  auto within = exchange(s.port(), chunked_request(body, 32, "", "x-pad: " + std::string(room, 'a') + "\r\n"));
  ASSERT_TRUE(within.has_value());
  EXPECT_EQ(within->result(), http::status::ok) << within->body();
  EXPECT_EQ(within->body(), "{\"echo\":96}");
  auto over = exchange(s.port(), chunked_request(body, 32, "", "x-pad: " + std::string(room + 1, 'a') + "\r\n"));
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ(over->result(), http::status::payload_too_large) << over->body();
}

TEST(http_server, many_small_chunks_whose_extensions_pass_the_body_limit_are_refused_with_413) {
  http_options o;
  o.max_body = 4096;
  running_server s(o);
  const std::string body(100, 'b');
  const std::string ext = ";name=" + std::string(40, 'v');  // 46 bytes a chunk, 101 chunks
  auto small = exchange(s.port(), chunked_request(body, 1, ";k=v", ""));
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->result(), http::status::ok) << small->body();
  auto res = exchange(s.port(), chunked_request(body, 1, ext, ""));
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->result(), http::status::payload_too_large) << res->body();
  EXPECT_TRUE(health_answers_200(s.port()));
}

TEST(http_server, serves_pipelined_requests_in_order) {
  running_server s({});
  std::string two = chunked_request("abc", 2, ";k=v", "x-t: 1\r\n") +
                    "POST /y HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nwxyz";
  client c(s.port());
  net::write(c.stream, net::buffer(two));
  for (const char* echo : {"{\"echo\":3}", "{\"echo\":4}"}) {
    http::response<http::string_body> res;
    http::read(c.stream, c.buffer, res);
    EXPECT_EQ(res.result(), http::status::ok);
    EXPECT_EQ(res.body(), echo);
  }
}

TEST(http_server, an_exception_outside_the_handler_ends_only_its_connection) {
  http_options o;
  auto calls = std::make_shared<std::atomic<int>>(0);
  o.on_response = [calls](int) {
    if (calls->fetch_add(1) == 0) throw std::runtime_error("metrics hook failed");
  };
  running_server s(o);
  {
    client c(s.port());
    EXPECT_EQ(c.send(http::verb::get, "/").result(), http::status::ok);
    EXPECT_TRUE(c.closed_by_server());
  }
  EXPECT_TRUE(health_answers_200(s.port()));
  EXPECT_TRUE(s.server().wait_idle(5s));
  EXPECT_EQ(s.server().connections(), 0u) << "a connection that threw must still be accounted as ended";
}

TEST(http_types, errors_have_the_openai_shape) {
  auto res = make_error(11, http::status::bad_request, "bad \"thing\"", "invalid_request_error", "c", "temperature");
  EXPECT_EQ(res.body(),
            R"({"error":{"message":"bad \"thing\"","type":"invalid_request_error","param":"temperature","code":"c"}})");
  EXPECT_EQ(res[http::field::content_type], "application/json");
  auto bare = make_error(11, http::status::not_found, "x", "invalid_request_error");
  EXPECT_NE(bare.body().find(R"("param":null,"code":null)"), std::string::npos);
}

}  // namespace
}  // namespace strata::io
