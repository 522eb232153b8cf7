#include "server/proxy/replica_pool.hpp"

#include <algorithm>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace strata::proxy {

namespace net = boost::asio;

replica_pool::replica_pool(const std::vector<std::string>& urls, metrics::registry& m, route::choice_options opts) : opts_(opts) {
  for (const auto& u : urls) {
    replica r;
    r.url = u.ends_with('/') ? u.substr(0, u.size() - 1) : u;
    r.address = *io::parse_http_url(r.url);
    const std::string label = "replica=\"" + r.url + "\"";
    r.routed = &m.make_counter("strata_route_requests_total", "Requests the router sent to each replica (retries included).", label);
    r.failures = &m.make_counter("strata_route_replica_failures_total", "Requests a replica refused or dropped before answering.", label);
    r.up = &m.make_gauge("strata_route_replica_up", "1 while the replica answers, 0 once it failed.", label);
    r.load = &m.make_gauge("strata_route_in_flight", "Requests in flight at each replica, as the router counts them.", label);
    r.up->set(1);
    replicas_.push_back(std::move(r));
  }
}

route::choice replica_pool::choose(const std::vector<std::vector<std::string>>& holders, const std::vector<int>& tried) {
  std::vector<route::replica_state> states;
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    const auto& r = replicas_[i];
    const bool excluded = std::find(tried.begin(), tried.end(), static_cast<int>(i)) != tried.end();
    states.push_back({r.url, r.alive && !excluded, r.in_flight});
  }
  auto c = route::choose_replica(states, holders, last_, opts_);
  if (c.replica >= 0) last_ = c.replica;
  return c;
}

void replica_pool::started(int i) {
  auto& r = at(i);
  ++r.in_flight;
  r.routed->inc();
  r.load->set(r.in_flight);
}

void replica_pool::ended(int i) {
  auto& r = at(i);
  --r.in_flight;
  r.load->set(r.in_flight);
}

void replica_pool::failed(int i) {
  at(i).failures->inc();
  set_alive(i, false);
}

void replica_pool::set_alive(int i, bool alive) {
  auto& r = at(i);
  if (r.alive != alive) spdlog::info("replica {} is {}", r.url, alive ? "up" : "down");
  r.alive = alive;
  r.up->set(alive ? 1 : 0);
}

void replica_pool::start_health_checks(net::any_io_executor ex, std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  for (std::size_t i = 0; i < replicas_.size(); ++i) net::co_spawn(ex, health_loop(static_cast<int>(i), interval, timeout), net::detached);
}

net::awaitable<void> replica_pool::health_loop(int i, std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  auto ex = co_await net::this_coro::executor;
  net::steady_timer timer(ex);
  for (;;) {
    timer.expires_after(interval);
    io::upstream_call call(ex);
    io::http_request req{io::http::verb::get, "/health", 11};  // named: see upstream.test.cpp on temporaries
    auto ec = co_await call.start(at(i).address, std::move(req), timeout, timeout);
    set_alive(i, !ec && call.head().result() == io::http::status::ok);
    call.close();
    auto [wait] = co_await timer.async_wait(net::as_tuple(net::use_awaitable));
    if (wait) co_return;
  }
}

}  // namespace strata::proxy
