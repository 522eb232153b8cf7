#pragma once
// router: maps a request's method and path to the endpoint that answers it, and enforces the
// API keys on every route but /health (and /metrics when it is public). Plain code with no I/O;
// `strata serve` owns one and the HTTP sessions call it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/http_types.hpp"
#include "src/common/metrics.hpp"
#include "src/config/config.hpp"

namespace strata::api {

/// What the endpoints read about the server; owned by `strata serve`, read from any thread.
struct server_status {
  /// False while the model loads: /health answers 503.
  std::atomic<bool> ready{false};
  std::string model_id;
  std::int64_t created = 0;
  /// Bearer keys; when any is set, every route but /health needs one. A key's name goes in its
  /// requests' access-log lines and its salt into their request_context (key_salt).
  std::vector<config::api_key> api_keys;
  /// /metrics answers without a key (for a scraper on a trusted network).
  bool metrics_public = false;
  /// The SSD tier's state for /health: "on", "degraded" or "off" (also when unset). Set before
  /// `ready`; called from any thread.
  std::function<std::string_view()> ssd_state;
};

/// An endpoint: gets the request (its body may be moved from) and returns the reply.
using endpoint = std::function<io::handler_result(io::http_request&, const io::request_context&)>;

class router {
 public:
  router(const server_status& status, metrics::registry& metrics);

  /// Registers `fn` for METHOD PATH. When keys are configured, it answers only requests that carry
  /// one (`Authorization: Bearer KEY`); others get a 401. `fn` sees the key's salt in its context.
  void add(io::http::verb method, std::string path, endpoint fn);
  /// An endpoint for every path under `prefix` (which ends with '/'), e.g. "/v1/responses/" for
  /// /v1/responses/{id}; exact paths are matched first.
  void add_prefix(io::http::verb method, std::string prefix, endpoint fn);

  io::handler_result handle(io::http_request& req, const io::request_context& ctx) const;

 private:
  io::http_response health(const io::http_request& req) const;
  io::http_response models(const io::http_request& req) const;
  /// False when keys are set and the request carries none of them; else true, with `key` the one
  /// it carries (null when no keys are set).
  bool authorized(const io::http_request& req, const config::api_key*& key) const;
  /// Whether `path` answers without a key: /health, and /metrics when metrics_public.
  bool is_public(std::string_view path) const;

  const server_status& status_;
  metrics::registry& metrics_;
  std::map<std::string, std::map<io::http::verb, endpoint>, std::less<>> routes_;
  std::map<std::string, std::map<io::http::verb, endpoint>, std::less<>> prefixes_;
};

/// Whether `given` equals `secret`, in time that depends only on `given`'s length: neither where
/// the strings differ nor the secret's length shows in it.
bool constant_time_equal(std::string_view given, std::string_view secret);

}  // namespace strata::api
