#pragma once
// chain_lookup: which replicas hold each block of a request's prompt, for the routing rule. The
// block keys come from a replica's POST /internal/chain: the router has no model and no
// tokenizer, and the replica renders the chat template, applies tools, a Responses conversation
// and the cache salt exactly as it would to run the request, so its keys are the ones replicas
// list; computing them here would mean loading a tokenizer and template per model and keeping
// every rule of the request preparation in step. The holders of each key then come from the
// Redis directory (HGETALL per key, sent at once). Any failure (no replica answers the chain, a
// Redis master is down) leaves the blocks concerned with no holder: routing falls back to load.
// Runs on the router's one thread, like the pool and the Redis client.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "io/http_types.hpp"
#include "io/redis/cluster_client.hpp"
#include "server/proxy/replica_pool.hpp"

namespace strata::proxy {

struct lookup_metrics {
  metrics::counter* lookups = nullptr;
  metrics::counter* chain_failures = nullptr;
  metrics::counter* directory_failures = nullptr;
  static lookup_metrics create(metrics::registry& r);
};

class chain_lookup {
 public:
  /// No Redis seeds: every lookup answers no holders at once (routing by load only).
  chain_lookup(boost::asio::any_io_executor ex, std::optional<redis::cluster_options> redis, replica_pool& pool,
               lookup_metrics m);

  /// holders[i]: the replica URLs listing block i of the prompt of a request to `path` with
  /// `body`; `auth` are the request's key headers (the salt of a key is in the hash).
  boost::asio::awaitable<std::vector<std::vector<std::string>>> holders(std::string path, std::string body, io::http::fields auth);

  void close();

 private:
  /// The directory keys of the request, asked of the replicas in turn until one answers; empty
  /// when none does.
  boost::asio::awaitable<std::vector<std::string>> keys(const std::string& path, const std::string& body,
                                                        const io::http::fields& auth);

  boost::asio::any_io_executor ex_;
  std::shared_ptr<redis::cluster_client> redis_;
  std::chrono::milliseconds redis_timeout_{300};
  replica_pool& pool_;
  lookup_metrics metrics_;
};

/// The key headers of `req` (Authorization, x-api-key), to pass on with what the router asks.
io::http::fields auth_headers(const io::http_request& req);

}  // namespace strata::proxy
