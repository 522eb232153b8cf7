#include "server/api/web_assets.hpp"

namespace strata::api {
namespace http = io::http;

namespace {

std::string_view content_type_of(std::string_view name) {
  auto ends = [&](std::string_view ext) { return name.ends_with(ext); };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

io::http_response serve(const io::http_request& req, std::string_view name) {
  auto asset = find_web_asset(name);
  if (!asset) {
    return io::make_error(req.version(), http::status::not_found, "no asset " + std::string(name), "invalid_request_error",
                          "not_found");
  }
  io::http_response res{http::status::ok, req.version()};
  res.set(http::field::content_type, asset->content_type);
  res.set("Content-Security-Policy", k_content_security_policy);
  res.set("X-Content-Type-Options", "nosniff");
  // The assets change only with the binary; a page reload after an upgrade fetches them again.
  res.set(http::field::cache_control, "no-cache");
  res.body() = std::string(asset->body);
  res.prepare_payload();
  return res;
}

}  // namespace

std::optional<web_asset> find_web_asset(std::string_view name) {
  for (const auto& [n, body] : embedded_files())
    if (n == name) return web_asset{body, content_type_of(name)};
  return std::nullopt;
}

void add_web_routes(router& r) {
  auto page = [](std::string_view name) {
    return [name](io::http_request& req, const io::request_context&) -> io::handler_result { return serve(req, name); };
  };
  r.add(http::verb::get, "/", page("index.html"), access::open);
  r.add(http::verb::get, "/admin", page("admin.html"), access::open);
  r.add_prefix(http::verb::get, "/assets/", [](io::http_request& req, const io::request_context&) -> io::handler_result {
    std::string_view target = req.target();
    std::string_view path = target.substr(0, target.find('?'));
    return serve(req, path.substr(std::string_view("/assets/").size()));
  }, access::open);
}

}  // namespace strata::api
