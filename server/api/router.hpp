#pragma once
// router: maps a request's method and path to the endpoint that answers it, and enforces the
// API keys on every route but /health, /metrics when it is public, and routes added as open (the
// web pages and their assets, which hold no data: their scripts send the key). Plain code with no I/O;
// `strata serve` owns one and the HTTP sessions call it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/http_types.hpp"
#include "src/common/metrics.hpp"
#include "src/config/config.hpp"

namespace strata::api {

/// What the endpoints read about the server; owned by `strata serve`, read from any thread.
struct server_status {
  /// False while the model loads: /health and every route not marked to answer while loading
  /// answer 503 (with what is loading).
  std::atomic<bool> ready{false};
  /// What the load is doing (for /health, the log and the dashboard) and how far it is (0..1;
  /// negative when unknown).
  void set_loading(std::string stage, double fraction) {
    std::lock_guard lock(loading_mutex_);
    loading_stage_ = std::move(stage);
    loading_fraction_ = fraction;
  }
  std::pair<std::string, double> loading() const {
    std::lock_guard lock(loading_mutex_);
    return {loading_stage_, loading_fraction_};
  }
  /// "loading the model: fingerprinting the model (45 %)".
  std::string loading_reason() const;
  std::string model_id;
  /// Where the layers run ("cpu" or "cuda"): /v1/models lists it with the model.
  std::string device = "cpu";
  std::int64_t created = 0;
  /// Bearer keys; when any is set, every route but /health needs one. A key's name goes in its
  /// requests' access-log lines and its salt into their request_context (key_salt).
  std::vector<config::api_key> api_keys;
  /// /metrics answers without a key (for a scraper on a trusted network).
  bool metrics_public = false;
  /// The SSD tier's state for /health: "on", "degraded" or "off" (also when unset). Set before
  /// `ready`; called from any thread.
  std::function<std::string_view()> ssd_state;

 private:
  mutable std::mutex loading_mutex_;
  std::string loading_stage_ = "starting";
  double loading_fraction_ = -1;
};

/// Whether a route needs an API key (when keys are set) or answers anyone.
enum class access { keyed, open };

/// An endpoint: gets the request (its body may be moved from) and returns the reply.
using endpoint = std::function<io::handler_result(io::http_request&, const io::request_context&)>;

class router {
 public:
  router(const server_status& status, metrics::registry& metrics);

  /// Registers `fn` for METHOD PATH. When keys are configured, it answers only requests that carry
  /// one (`Authorization: Bearer KEY`); others get a 401. `fn` sees the key's salt in its context.
  /// `open` routes answer without a key.
  void add(io::http::verb method, std::string path, endpoint fn, access a = access::keyed);
  /// An endpoint for every path under `prefix` (which ends with '/'), e.g. "/v1/responses/" for
  /// /v1/responses/{id}; exact paths are matched first.
  void add_prefix(io::http::verb method, std::string prefix, endpoint fn, access a = access::keyed);
  /// Lets `path` answer while the server loads (every other route but /health, /metrics and the
  /// open ones answers 503 until then); its endpoint reads status.ready itself.
  void answer_while_loading(std::string path) { while_loading_.insert(std::move(path)); }

  io::handler_result handle(io::http_request& req, const io::request_context& ctx) const;

 private:
  io::http_response health(const io::http_request& req) const;
  io::http_response models(const io::http_request& req) const;
  /// False when keys are set and the request carries none of them; else true, with `key` the one
  /// it carries (null when no keys are set).
  bool authorized(const io::http_request& req, const config::api_key*& key) const;
  /// Whether `path` answers without a key: /health, /metrics when metrics_public, and open routes
  /// (`prefix`: the prefix route that matched it, if any).
  bool is_public(std::string_view path, const std::string* prefix) const;

  const server_status& status_;
  metrics::registry& metrics_;
  std::map<std::string, std::map<io::http::verb, endpoint>, std::less<>> routes_;
  std::map<std::string, std::map<io::http::verb, endpoint>, std::less<>> prefixes_;
  /// Paths and prefixes of open routes.
  std::set<std::string, std::less<>> open_;
  std::set<std::string, std::less<>> while_loading_;
};

/// Whether `given` equals `secret`, in time that depends only on `given`'s length: neither where
/// the strings differ nor the secret's length shows in it.
bool constant_time_equal(std::string_view given, std::string_view secret);

}  // namespace strata::api
