#include "server/proxy/route_service.hpp"

#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "src/common/log.hpp"

namespace strata::proxy {

namespace net = boost::asio;
namespace http = io::http;

/// A stream waits this long at most for its replica's next bytes (replicas send a keep-alive
/// comment every few seconds while they compute).
constexpr std::chrono::minutes stream_idle{10};

struct route_service::exchange {
  /// The request as the replica gets it (HTTP/1.1), and the client's HTTP version.
  io::http_request req;
  unsigned version = 11;
  std::string path;
  policy how = policy::load;
  io::http::fields auth;
  std::shared_ptr<io::upstream_call> call;
  int replica = -1;
  /// The client went away: nothing more is tried, and a failure then is not the replica's.
  bool cancelled = false;
  /// What the client gets when no replica began a response.
  std::optional<io::http_response> failure;
  bool paused = false;
  std::optional<net::steady_timer> resume;
};

namespace {

/// Fields of one connection only (RFC 9110 7.6.1), and those the upstream request sets itself.
bool hop_by_hop(http::field f) {
  switch (f) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::content_length:
    case http::field::host:
      return true;
    default:
      return false;
  }
}

/// The request as a replica gets it: the client's, less its connection's fields.
io::http_request upstream_request(const io::http_request& in) {
  io::http_request out{in.method(), in.target(), 11};
  for (const auto& f : in)
    if (!hop_by_hop(f.name())) out.set(f.name_string(), f.value());
  out.body() = in.body();
  return out;
}

/// The replica's response head as the client gets it: its status and end-to-end fields, and which
/// replica answered.
io::http_response head_of(const http::response_header<>& head, unsigned version, const std::string& replica) {
  io::http_response res{head.result(), version};
  for (const auto& f : head)
    if (!hop_by_hop(f.name())) res.set(f.name_string(), f.value());
  res.set("x-strata-replica", replica);
  return res;
}

/// Whether the body asks for a stream ("stream": true).
bool wants_stream(const std::string& body) {
  if (body.find("\"stream\"") == std::string::npos) return false;
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return false;
  const auto* s = v.as_object().if_contains("stream");
  return s && s->is_bool() && s->as_bool();
}

}  // namespace

io::http_response no_replica_error(unsigned version) {
  return io::make_error(version, http::status::bad_gateway, "no replica is up to answer the request; retry shortly", "server_error",
                        "no_replica");
}

route_metrics route_metrics::create(metrics::registry& r) {
  route_metrics m;
  m.retries = &r.make_counter("strata_route_retries_total", "Requests sent again to another replica after one failed before answering.");
  m.no_replica = &r.make_counter("strata_route_no_replica_total", "Requests answered 502 because no replica was up.");
  m.prefix_hits = &r.make_counter("strata_route_prefix_hits_total", "Requests sent to a replica the directory lists with part of their prefix.");
  m.prefix_blocks = &r.make_counter("strata_route_prefix_blocks_total", "Cached prefix blocks of the chosen replicas, summed over requests.");
  return m;
}

route_service::route_service(net::any_io_executor ex, replica_pool& pool, chain_lookup& lookup, route_options opts,
                             metrics::registry& m)
    : ex_(std::move(ex)), pool_(pool), lookup_(lookup), opts_(opts), metrics_(route_metrics::create(m)) {}

void route_service::add_routes(api::router& r) {
  using http::verb;
  auto route = [this](policy p) {
    return [this, p](io::http_request& req, const io::request_context& ctx) { return forward(req, ctx, p); };
  };
  const policy chosen = opts_.by_prefix ? policy::prefix : policy::load;
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses"}) r.add(verb::post, path, route(chosen));
  for (const char* path : {"/v1/messages/count_tokens", "/tokenize", "/detokenize"}) r.add(verb::post, path, route(policy::load));
  r.add(verb::get, "/v1/models", route(policy::load));
  // A stored response lives on the replica that made it: each is asked until one has it.
  r.add_prefix(verb::get, "/v1/responses/", route(policy::seek));
  r.add_prefix(verb::delete_, "/v1/responses/", route(policy::seek));
  r.add(verb::get, "/v1/ws", [this](io::http_request& req, const io::request_context& ctx) { return websocket(req, ctx); });
  r.add(verb::get, "/health", [this](io::http_request& req, const io::request_context&) -> io::handler_result { return health(req); });
}

io::http_response route_service::health(const io::http_request& req) const {
  boost::json::array replicas;
  bool any = false;
  for (std::size_t i = 0; i < pool_.size(); ++i) {
    const auto& r = pool_.at(static_cast<int>(i));
    any = any || r.alive;
    replicas.push_back(boost::json::object{{"url", r.url}, {"up", r.alive}, {"in_flight", r.in_flight}});
  }
  boost::json::object body{{"status", any ? "ok" : "no_replica"}, {"replicas", std::move(replicas)}};
  return io::make_json(req.version(), any ? http::status::ok : http::status::service_unavailable, boost::json::serialize(body));
}

io::handler_result route_service::forward(io::http_request& req, const io::request_context& ctx, policy p) {
  auto x = std::make_shared<exchange>();
  x->path = std::string(req.target().substr(0, req.target().find('?')));
  x->how = p;
  x->auth = auth_headers(req);
  x->req = upstream_request(req);
  x->version = req.version();
  if (p == policy::prefix && wants_stream(x->req.body()))
    return io::async_reply{[this, x, strand = ctx.executor] { return streamed(x, strand); }};
  // A whole response: the session watches the client meanwhile, and one who leaves cancels the
  // queue, which closes the replica's connection (the replica then cancels the request).
  auto queue = io::reply_queue::create(ctx.executor);
  queue->on_cancel([x] {
    x->cancelled = true;
    if (x->call) x->call->close();
  });
  net::co_spawn(ctx.executor, whole(x, queue->address()), net::detached);
  return io::deferred_reply{queue, opts_.response_timeout + std::chrono::seconds(10)};
}

void route_service::count_prefix(const route::choice& c) {
  if (c.cached_blocks <= 0) return;
  metrics_.prefix_hits->inc();
  metrics_.prefix_blocks->inc(static_cast<std::uint64_t>(c.cached_blocks));
}

net::awaitable<bool> route_service::open(std::shared_ptr<exchange> x) {
  std::vector<std::vector<std::string>> holders;
  if (x->how == policy::prefix) holders = co_await lookup_.holders(x->path, x->req.body(), x->auth);
  std::vector<int> tried;
  for (;;) {
    if (x->cancelled) co_return false;
    const auto c = pool_.choose(holders, tried);
    if (c.replica < 0) break;
    if (!tried.empty()) metrics_.retries->inc();
    tried.push_back(c.replica);
    x->replica = c.replica;
    x->call = std::make_shared<io::upstream_call>(ex_);
    pool_.started(c.replica);
    auto ec = co_await x->call->start(pool_.at(c.replica).address, x->req, opts_.connect_timeout, opts_.response_timeout);
    if (!ec && x->how == policy::seek && x->call->head().result() == http::status::not_found) {
      // Not this replica's: its 404 stands only if no other has it either.
      std::string body;
      ec = co_await x->call->read_rest(body, opts_.response_timeout);
      if (!ec) {
        x->failure = io::make_json(x->version, http::status::not_found, std::move(body));
        pool_.ended(c.replica);
        x->call->close();
        continue;
      }
    }
    if (!ec) {
      count_prefix(c);
      co_return true;
    }
    pool_.ended(c.replica);
    x->call->close();
    if (x->cancelled) co_return false;
    spdlog::warn("replica {} failed before answering {}: {}; trying another", pool_.at(c.replica).url, x->path, ec.message());
    pool_.failed(c.replica);
  }
  if (!x->failure) {
    metrics_.no_replica->inc();
    x->failure = no_replica_error(x->version);
  }
  co_return false;
}

net::awaitable<void> route_service::whole(std::shared_ptr<exchange> x, io::reply_address to) {
  if (!co_await open(x)) {
    if (x->failure) to.send({x->failure->body(), static_cast<int>(x->failure->result_int())});
    co_return;
  }
  std::string body;
  auto ec = co_await x->call->read_rest(body, opts_.response_timeout);
  x->call->close();
  pool_.ended(x->replica);
  if (ec && !x->cancelled) {
    spdlog::warn("replica {} failed in the middle of its response to {}: {}", pool_.at(x->replica).url, x->path, ec.message());
    pool_.failed(x->replica);
    auto res = io::make_error(x->version, http::status::bad_gateway, "the replica failed while it sent its response", "server_error",
                              "replica_failed");
    to.send({res.body(), 502});
    co_return;
  }
  to.send({std::move(body), static_cast<int>(x->call->head().result_int())});
}

net::awaitable<io::handler_result> route_service::streamed(std::shared_ptr<exchange> x, net::any_io_executor strand) {
  if (!co_await open(x)) co_return *x->failure;
  const auto& head = x->call->head();
  if (!x->call->chunked()) {
    // Refused before its stream began (a 400, a 429): the whole answer, as the replica wrote it.
    std::string body;
    auto ec = co_await x->call->read_rest(body, opts_.response_timeout);
    x->call->close();
    pool_.ended(x->replica);
    if (ec) co_return io::make_error(x->version, http::status::bad_gateway, "the replica failed while it sent its response",
                                     "server_error", "replica_failed");
    io::http_response res = head_of(head, x->version, pool_.at(x->replica).url);
    res.body() = std::move(body);
    res.prepare_payload();
    co_return res;
  }
  io::stream_reply sr;
  sr.head = head_of(head, x->version, pool_.at(x->replica).url);
  // The replica's own keep-alive comments come through; the router adds none.
  sr.keepalive = std::chrono::hours(24);
  sr.queue = io::reply_queue::create(strand);
  x->resume.emplace(strand);
  sr.queue->on_cancel([x] {
    x->cancelled = true;
    x->call->close();
  });
  sr.queue->on_pressure([x](bool paused) {
    x->paused = paused;
    if (!paused) x->resume->cancel();
  });
  net::co_spawn(strand, pump(x, sr.queue->address()), net::detached);
  co_return sr;
}

net::awaitable<void> route_service::pump(std::shared_ptr<exchange> x, io::reply_address to) {
  std::string piece;
  bool cut = false;
  for (;;) {
    while (x->paused && !x->cancelled) {
      // The client reads slowly: the replica's bytes wait in the network's buffers meanwhile.
      x->resume->expires_at(net::steady_timer::time_point::max());
      co_await x->resume->async_wait(net::as_tuple(net::use_awaitable));
    }
    if (x->cancelled) break;
    auto ec = co_await x->call->read_some(piece, stream_idle);
    if (ec) {
      cut = !x->cancelled;
      break;
    }
    if (piece.empty() || !to.send({std::move(piece)})) break;
  }
  x->call->close();
  pool_.ended(x->replica);
  if (cut) {
    spdlog::warn("replica {} cut its stream to {}", pool_.at(x->replica).url, x->path);
    pool_.failed(x->replica);
    io::reply_part abort;
    abort.abort = true;
    to.send(std::move(abort));
  }
  to.close();
}

}  // namespace strata::proxy
