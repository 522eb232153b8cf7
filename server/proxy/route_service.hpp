#pragma once
// route_service: the endpoints of `strata route`. Each API request is sent to one replica,
// chosen by the longest cached prefix its prompt has in the directory (chain_lookup) balanced by
// the requests in flight (replica_pool), and its response passed back as the replica wrote it:
// a streamed one chunk by chunk as each arrives, a whole one at once. A replica that refuses the
// connection or drops it before its response began is marked down and the request goes to
// another; once a stream has begun, a replica that dies cuts the client's stream the same way.
// WebSockets are proxied frame by frame (ws_proxy.cpp). Every handler and coroutine runs on the
// router's one thread.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "io/http_types.hpp"
#include "io/upstream.hpp"
#include "server/api/router.hpp"
#include "server/proxy/chain_lookup.hpp"
#include "server/proxy/replica_pool.hpp"

namespace strata::proxy {

struct ws_link;

struct route_options {
  std::chrono::milliseconds connect_timeout{2000};
  /// How long a replica may take to begin its response (a whole completion's, when not streamed).
  std::chrono::milliseconds response_timeout{600'000};
  /// Choose by cached prefix (false: by load alone, for comparison).
  bool by_prefix = true;
};

struct route_metrics {
  metrics::counter* retries = nullptr;
  metrics::counter* no_replica = nullptr;
  metrics::counter* prefix_hits = nullptr;
  metrics::counter* prefix_blocks = nullptr;
  static route_metrics create(metrics::registry& r);
};

class route_service {
 public:
  route_service(boost::asio::any_io_executor ex, replica_pool& pool, chain_lookup& lookup, route_options opts, metrics::registry& m);

  /// Registers the API's routes, /health and /v1/models on `r` (its /metrics stays).
  void add_routes(api::router& r);

  /// One request on its way through the router (shared by the attempts and the stream pump).
  struct exchange;

 private:
  enum class policy { prefix, load, seek };
  io::handler_result forward(io::http_request& req, const io::request_context& ctx, policy p);
  io::handler_result websocket(io::http_request& req, const io::request_context& ctx);
  io::http_response health(const io::http_request& req) const;
  /// Counts a request sent to a listed holder of its prefix.
  void count_prefix(const route::choice& c);
  /// Sends the exchange's request to replicas in turn until one begins a response; false when
  /// none could (then x->failure says why, as a response).
  boost::asio::awaitable<bool> open(std::shared_ptr<exchange> x);
  boost::asio::awaitable<io::handler_result> streamed(std::shared_ptr<exchange> x, boost::asio::any_io_executor strand);
  boost::asio::awaitable<void> whole(std::shared_ptr<exchange> x, io::reply_address to);
  boost::asio::awaitable<void> proxy_websocket(std::shared_ptr<ws_link> link, std::string target, io::http::fields auth,
                                              std::string first);
  boost::asio::awaitable<void> pump(std::shared_ptr<exchange> x, io::reply_address to);

  boost::asio::any_io_executor ex_;
  replica_pool& pool_;
  chain_lookup& lookup_;
  route_options opts_;
  route_metrics metrics_;
};

/// The 502 the router answers when no replica is up.
io::http_response no_replica_error(unsigned version);

}  // namespace strata::proxy
