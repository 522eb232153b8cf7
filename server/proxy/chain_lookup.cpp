#include "server/proxy/chain_lookup.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "actors/directory/directory_actor.hpp"
#include "io/upstream.hpp"

namespace strata::proxy {

namespace net = boost::asio;
namespace http = io::http;

namespace {

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// The answers of one lookup's HGETALLs, gathered; the timer wakes the waiting coroutine when the
/// last is in.
struct gather {
  explicit gather(net::any_io_executor ex) : done(std::move(ex)) {}
  std::vector<std::vector<std::string>> holders;
  std::size_t left = 0;
  bool failed = false;
  net::steady_timer done;
};

/// The "keys" of an /internal/chain answer; empty when the body is not one.
std::vector<std::string> keys_of(const std::string& body) {
  std::vector<std::string> out;
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return out;
  const auto* keys = v.as_object().if_contains("keys");
  if (!keys || !keys->is_array()) return out;
  for (const auto& k : keys->as_array())
    if (k.is_string()) out.emplace_back(k.as_string());
  return out;
}

}  // namespace

lookup_metrics lookup_metrics::create(metrics::registry& r) {
  lookup_metrics m;
  m.lookups = &r.make_counter("strata_route_lookups_total", "Requests whose prompt chain the router looked up in the directory.");
  m.chain_failures = &r.make_counter("strata_route_chain_failures_total", "Lookups where no replica named the request's blocks.");
  m.directory_failures = &r.make_counter("strata_route_directory_failures_total",
                                         "Lookups where Redis did not answer for every block (those blocks count as held by none).");
  return m;
}

http::fields auth_headers(const io::http_request& req) {
  http::fields f;
  if (auto a = req[http::field::authorization]; !a.empty()) f.set(http::field::authorization, a);
  if (auto k = req["x-api-key"]; !k.empty()) f.set("x-api-key", k);
  return f;
}

chain_lookup::chain_lookup(net::any_io_executor ex, std::optional<redis::cluster_options> redis, replica_pool& pool,
                           lookup_metrics m)
    : ex_(ex), pool_(pool), metrics_(m) {
  if (redis) {
    redis_timeout_ = redis->timeout;
    redis_ = redis::cluster_client::create(ex, std::move(*redis));
  }
}

void chain_lookup::close() {
  if (redis_) redis_->close();
}

net::awaitable<std::vector<std::string>> chain_lookup::keys(const std::string& path, const std::string& body,
                                                           const http::fields& auth) {
  std::vector<int> tried;
  // A replica that cannot prepare the request (a Responses conversation it does not store) may
  // be the only one that cannot: the others are asked in turn.
  for (int i = pool_.any(tried); i >= 0; i = pool_.any(tried)) {
    tried.push_back(i);
    io::http_request req{http::verb::post, "/internal/chain", 11};
    for (const auto& f : auth) req.set(f.name_string(), f.value());
    req.set("x-strata-path", path);
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    io::upstream_call call(ex_);
    const auto t = std::chrono::seconds(10);
    auto ec = co_await call.start(pool_.at(i).address, std::move(req), t, t);
    std::string answer;
    if (!ec) ec = co_await call.read_rest(answer, t);
    call.close();
    if (!ec && call.head().result() == http::status::ok) co_return keys_of(answer);
  }
  co_return std::vector<std::string>{};
}

net::awaitable<std::vector<std::vector<std::string>>> chain_lookup::holders(std::string path, std::string body, http::fields auth) {
  if (!redis_) co_return std::vector<std::vector<std::string>>{};
  metrics_.lookups->inc();
  auto keys = co_await this->keys(path, body, auth);
  if (keys.empty()) {
    metrics_.chain_failures->inc();
    co_return std::vector<std::vector<std::string>>{};
  }
  auto g = std::make_shared<gather>(ex_);
  g->holders.resize(keys.size());
  g->left = keys.size();
  g->done.expires_after(redis_timeout_ * 3);
  const std::int64_t now = unix_now();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    redis_->command({"HGETALL", keys[i]}, [g, i, now](result<redis::reply> r) {
      if (r && !r->is_error()) {
        g->holders[i] = directory::live_holders(*r, now);
      } else {
        g->failed = true;
      }
      if (--g->left == 0) g->done.cancel();
    });
  }
  co_await g->done.async_wait(net::as_tuple(net::use_awaitable));
  if (g->failed || g->left > 0) metrics_.directory_failures->inc();
  co_return g->holders;
}

}  // namespace strata::proxy
