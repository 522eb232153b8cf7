#include "server/api/admin_controls.hpp"

#include <optional>
#include <string>

#include <boost/json.hpp>

#include "server/api/admin_stats.hpp"

namespace strata::api {
namespace http = io::http;
namespace json = boost::json;

namespace {

io::http_response bad_request(const io::http_request& req, std::string_view message, std::string_view param) {
  return io::make_error(req.version(), http::status::bad_request, message, "invalid_request_error", "invalid_value", param);
}

/// The string member `key` of the JSON object in the request's body; empty when absent.
std::optional<std::string> string_member(const io::http_request& req, std::string_view key) {
  json::error_code ec;
  json::value v = json::parse(req.body(), ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::value* m = v.as_object().if_contains(key);
  if (!m || !m->is_string()) return std::nullopt;
  return std::string(m->as_string());
}

io::http_response set_mode(const io::http_request& req, engine::engine& e) {
  auto given = string_member(req, "mode");
  auto mode = given ? config::parse_cache_mode(*given) : std::nullopt;
  if (!mode) return bad_request(req, R"(send {"mode":"off"|"hot"|"tiered"})", "mode");
  if (auto r = e.set_cache_mode(*mode); !r)
    return io::make_error(req.version(), http::status::conflict, r.err().message, "invalid_request_error", "mode_unavailable");
  return io::make_json(req.version(), http::status::ok, R"({"cache_mode":")" + std::string(config::to_string(*mode)) + R"("})");
}

io::http_response clear(const io::http_request& req, engine::engine& e) {
  auto tier = string_member(req, "tier");
  if (tier == "hot" || tier == "ram") {
    e.clear_hot();
    return io::make_json(req.version(), http::status::ok, R"({"cleared":"hot"})");
  }
  if (tier == "ssd") {
    if (!e.clear_ssd())
      return io::make_error(req.version(), http::status::conflict, "there is no SSD tier to clear (cache.mode is not tiered)",
                            "invalid_request_error", "tier_unavailable");
    return io::make_json(req.version(), http::status::ok, R"({"cleared":"ssd"})");
  }
  if (tier == "host") {
    if (!e.clear_host())
      return io::make_error(req.version(), http::status::conflict, "there is no host tier to clear (cache.host_memory is 0)",
                            "invalid_request_error", "tier_unavailable");
    return io::make_json(req.version(), http::status::ok, R"({"cleared":"host"})");
  }
  return bad_request(req, R"(send {"tier":"hot"|"host"|"ssd"})", "tier");
}

}  // namespace

void add_admin_routes(router& r, const std::unique_ptr<engine::engine>& e, const server_status& status) {
  using io::handler_result;
  r.add(http::verb::get, "/admin/api/stats", [&e, &status](io::http_request& req, const io::request_context&) -> handler_result {
    if (!status.ready.load()) {
      auto [stage, fraction] = status.loading();
      json::object loading{{"stage", stage}, {"progress", fraction >= 0 ? json::value(fraction) : json::value(nullptr)}};
      return io::make_json(req.version(), http::status::ok, json::serialize(json::object{{"loading", std::move(loading)}}));
    }
    return io::make_json(req.version(), http::status::ok, render_admin_stats(*e, status));
  });
  r.answer_while_loading("/admin/api/stats");
  // The router answers these only once the model is loaded, so `e` is set.
  r.add(http::verb::post, "/admin/api/cache/mode",
        [&e](io::http_request& req, const io::request_context&) -> handler_result { return set_mode(req, *e); });
  r.add(http::verb::post, "/admin/api/cache/clear",
        [&e](io::http_request& req, const io::request_context&) -> handler_result { return clear(req, *e); });
}

}  // namespace strata::api
