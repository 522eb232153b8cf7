// route_service::websocket: `GET /v1/ws` through the router. The client's socket is proxied to one
// replica's, frame by frame both ways: the replica is chosen when the first message comes (by the
// prefix of that request, as for HTTP), and every later message of the socket goes there too, so a
// cancel reaches the request it names. Until the replica's socket is open, the client's messages
// wait in order; a replica that cannot be reached is marked down and another is tried. When
// either side closes, so does the other.

#include <deque>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include "server/proxy/route_service.hpp"
#include "src/api/stream_framing.hpp"
#include "src/api/ws_envelope.hpp"

namespace strata::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;
constexpr auto nothrow = net::as_tuple(net::use_awaitable);

/// One client socket and its replica's, on the client connection's strand.
struct ws_link {
  explicit ws_link(net::any_io_executor strand) : wake(strand), resume(strand) {}
  std::shared_ptr<io::websocket_client> up;
  int replica = -1;
  /// Client messages not yet written to the replica.
  std::deque<std::string> pending;
  bool opening = false, writing = false, closed = false, paused = false;
  io::reply_address outbox;
  net::steady_timer wake;    // the writer waits on it for messages
  net::steady_timer resume;  // the reader waits on it while the client's outbox is full
};

namespace {

std::string_view path_of(api::schema::ws_envelope::target t) {
  return t == api::schema::ws_envelope::target::completions ? "/v1/completions" : "/v1/chat/completions";
}

/// Writes the client's messages to the replica, in order, until the link closes.
net::awaitable<void> write_up(std::shared_ptr<ws_link> l) {
  while (!l->closed) {
    if (l->pending.empty()) {
      l->wake.expires_at(net::steady_timer::time_point::max());
      co_await l->wake.async_wait(nothrow);
      continue;
    }
    std::string text = std::move(l->pending.front());
    l->pending.pop_front();
    l->up->text(true);
    auto [ec, n] = co_await l->up->async_write(net::buffer(text), nothrow);
    if (ec) break;
  }
}

/// Passes the replica's frames to the client until the replica's socket ends.
net::awaitable<void> read_up(std::shared_ptr<ws_link> l) {
  beast::flat_buffer buffer;
  while (!l->closed) {
    while (l->paused && !l->closed) {
      l->resume.expires_at(net::steady_timer::time_point::max());
      co_await l->resume.async_wait(nothrow);
    }
    auto [ec, n] = co_await l->up->async_read(buffer, nothrow);
    if (ec) break;
    if (!l->outbox.send({beast::buffers_to_string(buffer.data())})) break;
    buffer.consume(buffer.size());
  }
}

}  // namespace

/// Runs once per socket, from its first message: chooses the replica, opens its socket and
/// proxies the two until either ends.
net::awaitable<void> route_service::proxy_websocket(std::shared_ptr<ws_link> link, std::string target, io::http::fields auth,
                                                   std::string first) {
  std::vector<std::vector<std::string>> holders;
  api::schema::ws_envelope env;
  if (opts_.by_prefix && !api::schema::parse_ws_envelope(first, env) && env.type == api::schema::ws_envelope::kind::request)
    holders = co_await lookup_.holders(std::string(path_of(env.endpoint)), env.body, auth);
  std::vector<int> tried;
  while (!link->closed) {
    const auto c = pool_.choose(holders, tried);
    if (c.replica < 0) break;
    if (!tried.empty()) metrics_.retries->inc();
    tried.push_back(c.replica);
    auto [ec, ws] = co_await io::connect_websocket(link->wake.get_executor(), pool_.at(c.replica).address, target, auth,
                                                   opts_.connect_timeout);
    if (ec) {
      spdlog::warn("replica {} refused a WebSocket: {}; trying another", pool_.at(c.replica).url, ec.message());
      pool_.failed(c.replica);
      continue;
    }
    count_prefix(c);
    link->up = ws;
    link->replica = c.replica;
    pool_.started(c.replica);
    using namespace boost::asio::experimental::awaitable_operators;
    co_await (write_up(link) || read_up(link));
    pool_.ended(c.replica);
    beast::error_code ignored;
    beast::get_lowest_layer(*ws).socket().close(ignored);
    link->outbox.close();
    co_return;
  }
  if (!link->closed) {
    metrics_.no_replica->inc();
    api::schema::api_error e{502, "no replica is up to answer the request; retry shortly", "server_error", {}, "no_replica"};
    link->outbox.send({api::schema::ws_error_frame(env.id_json, e)});
  }
  link->outbox.close();
}

io::handler_result route_service::websocket(io::http_request& req, const io::request_context& ctx) {
  auto link = std::make_shared<ws_link>(ctx.executor);
  const std::string target(req.target());
  auto auth = auth_headers(req);
  io::websocket_accept accept;
  accept.on_message = [this, link, target, auth](io::websocket_message m) {
    link->outbox = m.outbox;
    link->pending.push_back(m.text);
    link->wake.cancel();
    if (link->opening) return;
    link->opening = true;
    net::co_spawn(link->wake.get_executor(), proxy_websocket(link, target, auth, std::move(m.text)), net::detached);
  };
  accept.on_pressure = [link](bool paused) {
    link->paused = paused;
    if (!paused) link->resume.cancel();
  };
  accept.on_close = [link] {
    link->closed = true;
    link->wake.cancel();
    link->resume.cancel();
    if (link->up) {
      beast::error_code ignored;
      beast::get_lowest_layer(*link->up).socket().close(ignored);
    }
  };
  return accept;
}

}  // namespace strata::proxy
