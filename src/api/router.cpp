#include "src/api/router.hpp"

namespace strata::api {

namespace http = io::http;

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Length differences are not secret (keys have public formats); contents are.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  std::size_t n = a.size() < b.size() ? a.size() : b.size();
  for (std::size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

io::http_response router::health(const io::http_request& req) const {
  if (!status_.ready.load()) {
    auto res = io::make_json(req.version(), http::status::service_unavailable, R"({"status":"loading"})");
    res.set(http::field::retry_after, "1");
    return res;
  }
  return io::make_json(req.version(), http::status::ok, R"({"status":"ok"})");
}

io::http_response router::handle(const io::http_request& req, const io::request_context&) const {
  std::string_view target = req.target();
  std::string_view path = target.substr(0, target.find('?'));
  if (path == "/health") {
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      auto res = io::make_error(req.version(), http::status::method_not_allowed, "use GET for /health",
                                "invalid_request_error", "method_not_allowed");
      res.set(http::field::allow, "GET, HEAD");
      return res;
    }
    return health(req);
  }
  return io::make_error(req.version(), http::status::not_found,
                        "no endpoint " + std::string(req.method_string()) + " " + std::string(path),
                        "invalid_request_error", "not_found");
}

}  // namespace strata::api
