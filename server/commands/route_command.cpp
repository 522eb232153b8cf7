// `strata route`: the router in front of several `strata serve` replicas. It speaks the same API
// and sends each request to the replica that holds the longest cached prefix of its prompt (from
// the Redis directory the replicas publish to), balanced by the requests in flight at each, and
// passes the answers through unchanged (server/proxy). It runs on one thread: it only moves bytes.

#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include "io/http_server.hpp"
#include "io/upstream.hpp"
#include "server/api/router.hpp"
#include "server/commands/command_registry.hpp"
#include "server/proxy/chain_lookup.hpp"
#include "server/proxy/replica_pool.hpp"
#include "server/proxy/route_service.hpp"
#include "src/common/log.hpp"
#include "src/config/config.hpp"

namespace strata::commands {
namespace {

struct route_cli {
  std::vector<std::string> replicas;
  std::optional<std::string> redis;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<std::string> api_keys;
  bool load_only = false;
  int slack = 4;
  std::string health_interval = "1s";
  std::string health_timeout = "3s";
  std::string redis_timeout = "300ms";
  std::string log_level = "info";
  bool log_json = false;
};

/// The replicas' URLs, checked; an error message when one is not an http://host:port URL.
std::optional<std::string> check(const route_cli& o) {
  if (o.replicas.empty()) return "name at least one --replica URL";
  for (const auto& u : o.replicas)
    if (!io::parse_http_url(u)) return "--replica: expected http://host:port, got '" + u + "'";
  if (o.port < 0 || o.port > 65535) return "--port: must be 0..65535";
  if (o.redis && !redis::parse_nodes(*o.redis)) return "--redis: expected host:port[,host:port...], got '" + *o.redis + "'";
  if (!config::parse_duration(o.health_interval)) return "--health-interval: expected a duration such as 1s";
  if (!config::parse_duration(o.health_timeout)) return "--health-timeout: expected a duration such as 3s";
  if (!config::parse_duration(o.redis_timeout)) return "--redis-timeout: expected a duration such as 300ms";
  return std::nullopt;
}

int route(const route_cli& o) {
  if (auto bad = check(o)) {
    std::fprintf(stderr, "strata route: %s\n", bad->c_str());
    return 2;
  }
  log::init(o.log_level, o.log_json);
  boost::asio::io_context ctx(1);
  metrics::registry metrics;
  api::server_status status;
  for (const auto& k : o.api_keys) status.api_keys.push_back(config::api_key{k, {}, {}});
  status.ready.store(true);
  api::router router(status, metrics);

  proxy::replica_pool pool(o.replicas, metrics, route::choice_options{o.slack});
  std::optional<redis::cluster_options> redis_opts;
  if (o.redis) {
    redis_opts.emplace();
    redis_opts->seeds = *redis::parse_nodes(*o.redis);
    redis_opts->timeout = *config::parse_duration(o.redis_timeout);
  }
  proxy::chain_lookup lookup(ctx.get_executor(), redis_opts, pool, proxy::lookup_metrics::create(metrics));
  proxy::route_options ro;
  ro.by_prefix = !o.load_only && o.redis.has_value();
  proxy::route_service service(ctx.get_executor(), pool, lookup, ro, metrics);
  service.add_routes(router);

  io::http_options http_opts;
  http_opts.host = o.host;
  http_opts.port = static_cast<std::uint16_t>(o.port);
  http_opts.max_body = 64ull << 20;
  auto server = std::make_shared<io::http_server>(
      ctx, http_opts, [&router](io::http_request& req, const io::request_context& c) -> io::handler_result { return router.handle(req, c); });
  if (auto started = server->start(); !started) {
    spdlog::error("{}", started.err().message);
    return 1;
  }
  pool.start_health_checks(ctx.get_executor(), *config::parse_duration(o.health_interval), *config::parse_duration(o.health_timeout));
  boost::asio::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}; shutting down", sig);
    server->stop();
    lookup.close();
    ctx.stop();
  });
  spdlog::info("strata route listening on http://{}:{}: {} replicas, routing by {}", o.host, server->port(), pool.size(),
               ro.by_prefix ? "cached prefix (Redis " + *o.redis + ") and load" : "load only");
  ctx.run();
  spdlog::info("stopped");
  return 0;
}

const bool registered = register_command("route", "Route API requests to replicas by cached prefix and load", [](CLI::App& sub) {
  auto o = std::make_shared<route_cli>();
  sub.add_option("--replica", o->replicas, "A replica's URL as it advertises itself, e.g. http://10.0.0.2:8080 (repeatable)")->required();
  sub.add_option("--redis", o->redis, "The replicas' Redis cluster directory: host:port[,host:port...] (none: route by load only)");
  sub.add_option("--host", o->host, "Address to listen on");
  sub.add_option("--port", o->port, "Port to listen on (0 = any free port)");
  sub.add_option("--api-key", o->api_keys, "Accepted API key (repeatable); requests pass on to the replicas with their key");
  sub.add_flag("--load-only", o->load_only, "Ignore cached prefixes: least busy replica, round robin among equals");
  sub.add_option("--slack", o->slack, "Requests in flight the best prefix may have beyond the least busy replica");
  sub.add_option("--health-interval", o->health_interval, "How often each replica's /health is asked");
  sub.add_option("--health-timeout", o->health_timeout, "How long a replica may take to answer /health before it counts as down");
  sub.add_option("--redis-timeout", o->redis_timeout, "Deadline of each directory lookup's Redis commands");
  sub.add_option("--log-level", o->log_level, "trace | debug | info | warn | error | off");
  sub.add_flag("--log-json", o->log_json, "Write logs as JSON lines");
  return std::function<int()>([o] { return route(*o); });
});

}  // namespace
}  // namespace strata::commands
