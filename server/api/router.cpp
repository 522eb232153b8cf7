#include "server/api/router.hpp"

#include "src/common/log.hpp"

namespace strata::api {

namespace http = io::http;

bool constant_time_equal(std::string_view given, std::string_view secret) {
  // The loop runs over the client's string only and walks the secret cyclically, so the time
  // depends on what the client sent, never on the secret; the lengths enter as one more difference.
  std::size_t diff = given.size() ^ secret.size();
  if (secret.empty()) return diff == 0;
  std::size_t j = 0;
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(secret[j]);
    ++j;
    j *= static_cast<std::size_t>(j != secret.size());  // wraps to 0 without a branch
  }
  return diff == 0;
}

std::string server_status::loading_reason() const {
  auto [stage, fraction] = loading();
  std::string reason = "loading the model: " + stage;
  if (fraction >= 0) reason += " (" + std::to_string(static_cast<int>(fraction * 100)) + " %)";
  return reason;
}

router::router(const server_status& status, metrics::registry& metrics) : status_(status), metrics_(metrics) {
  add(http::verb::get, "/health", [this](io::http_request& req, const io::request_context&) -> io::handler_result {
    return health(req);
  });
  add(http::verb::get, "/v1/models", [this](io::http_request& req, const io::request_context&) -> io::handler_result {
    return models(req);
  });
  add(http::verb::get, "/metrics", [this](io::http_request& req, const io::request_context&) -> io::handler_result {
    io::http_response res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.body() = metrics_.render();
    res.prepare_payload();
    return res;
  });
  answer_while_loading("/metrics");  // a scraper sees the server up, if not ready (/health says why)
}

void router::add(http::verb method, std::string path, endpoint fn, access a) {
  if (a == access::open) open_.insert(path);
  routes_[std::move(path)][method] = std::move(fn);
}

void router::add_prefix(http::verb method, std::string prefix, endpoint fn, access a) {
  if (a == access::open) open_.insert(prefix);
  prefixes_[std::move(prefix)][method] = std::move(fn);
}

io::http_response router::health(const io::http_request& req) const {
  if (!status_.ready.load()) {
    auto res = io::make_json(req.version(), http::status::service_unavailable,
                             R"({"status":"loading","reason":")" + log::json_escape(status_.loading_reason()) + R"("})");
    res.set(http::field::retry_after, "1");
    return res;
  }
  const std::string_view ssd = status_.ssd_state ? status_.ssd_state() : std::string_view("off");
  return io::make_json(req.version(), http::status::ok, R"({"status":"ok","ssd":")" + log::json_escape(ssd) + R"("})");
}

io::http_response router::models(const io::http_request& req) const {
  std::string body = R"({"object":"list","data":[)";
  if (!status_.model_id.empty()) {
    body += R"({"id":")" + log::json_escape(status_.model_id) + R"(","object":"model","created":)" +
            std::to_string(status_.created) + R"(,"owned_by":"strata","device":")" + log::json_escape(status_.device) + R"("})";
  }
  body += "]}";
  return io::make_json(req.version(), http::status::ok, std::move(body));
}

bool router::authorized(const io::http_request& req, const config::api_key*& key) const {
  key = nullptr;
  if (status_.api_keys.empty()) return true;
  // `Authorization: Bearer KEY` (OpenAI's clients), else `x-api-key: KEY` (Anthropic's).
  auto header = req[http::field::authorization];
  constexpr std::string_view bearer = "Bearer ";
  std::string_view given = req["x-api-key"];
  if (header.size() > bearer.size() && header.substr(0, bearer.size()) == bearer)
    given = std::string_view(header.data() + bearer.size(), header.size() - bearer.size());
  if (given.empty()) return false;
  // Every key is compared and the match selected without a branch, so the time taken does not
  // reveal whether, or which, key matched.
  std::size_t found = 0;  // 1 + the index of the last match; 0 for none
  for (std::size_t i = 0; i < status_.api_keys.size(); ++i) {
    const auto match = static_cast<std::size_t>(constant_time_equal(given, status_.api_keys[i].key));
    found ^= (std::size_t{0} - match) & (found ^ (i + 1));
  }
  if (found == 0) return false;
  key = &status_.api_keys[found - 1];
  return true;
}

bool router::is_public(std::string_view path, const std::string* prefix) const {
  if (path == "/health" || (path == "/metrics" && status_.metrics_public)) return true;
  return prefix ? open_.contains(*prefix) : open_.contains(path);
}

io::handler_result router::handle(io::http_request& req, const io::request_context& ctx) const {
  std::string_view target = req.target();
  std::string_view path = target.substr(0, target.find('?'));
  const std::map<http::verb, endpoint>* methods = nullptr;
  const std::string* prefix = nullptr;
  if (auto it = routes_.find(path); it != routes_.end()) methods = &it->second;
  // Else a prefix that `path` extends by one last segment of its own (/v1/responses/{id}).
  for (auto p = prefixes_.begin(); !methods && p != prefixes_.end(); ++p)
    if (path.size() > p->first.size() && path.starts_with(p->first) && path.find('/', p->first.size()) == std::string_view::npos) {
      methods = &p->second;
      prefix = &p->first;
    }
  if (!methods) {
    return io::make_error(req.version(), http::status::not_found,
                          "no endpoint " + std::string(req.method_string()) + " " + std::string(path),
                          "invalid_request_error", "not_found");
  }
  const config::api_key* key = nullptr;
  if (!is_public(path, prefix) && !authorized(req, key)) {
    auto res = io::make_error(req.version(), http::status::unauthorized,
                              "missing or invalid API key: send 'Authorization: Bearer KEY' (or 'x-api-key: KEY')", "invalid_request_error",
                              "invalid_api_key");
    res.set(http::field::www_authenticate, "Bearer");
    return res;
  }
  if (!status_.ready.load() && path != "/health" && !is_public(path, prefix) && !while_loading_.contains(path)) {
    auto res = io::make_error(req.version(), http::status::service_unavailable, status_.loading_reason() + "; retry shortly",
                              "server_error", "loading");
    res.set(http::field::retry_after, "1");
    return res;
  }
  auto method = req.method() == http::verb::head ? http::verb::get : req.method();
  auto fn = methods->find(method);
  if (fn == methods->end()) {
    std::string allow;
    for (const auto& [verb, _] : *methods) allow += (allow.empty() ? "" : ", ") + std::string(http::to_string(verb));
    auto res = io::make_error(req.version(), http::status::method_not_allowed,
                              "use " + allow + " for " + std::string(path), "invalid_request_error",
                              "method_not_allowed");
    res.set(http::field::allow, allow);
    return res;
  }
  if (!key || (key->name.empty() && key->salt.empty())) return fn->second(req, ctx);
  if (ctx.key_name) *ctx.key_name = key->name;
  io::request_context keyed = ctx;
  keyed.key_salt = key->salt;
  return fn->second(req, keyed);
}

}  // namespace strata::api
