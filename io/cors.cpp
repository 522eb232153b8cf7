#include "io/cors.hpp"

#include <boost/beast/core/string.hpp>

namespace strata::io {

namespace {

/// How long a browser may cache a preflight's answer, in seconds.
constexpr std::string_view preflight_max_age = "600";
/// The request headers allowed when a preflight names none.
constexpr std::string_view default_allowed_headers = "Authorization, Content-Type";

/// Whether `list` is a comma-separated list of header names (tokens and optional whitespace),
/// safe to echo back.
bool is_header_name_list(std::string_view list) {
  if (list.empty()) return false;
  for (char c : list) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == ',' || c == ' ' || c == '\t';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool origin_allowed(const std::vector<std::string>& allowed, std::string_view origin) {
  if (origin.empty()) return false;
  for (const auto& a : allowed) {
    if (a == "*" || boost::beast::iequals(a, origin)) return true;
  }
  return false;
}

std::string allowed_origin_of(const http_request& req, const std::vector<std::string>& allowed) {
  auto origin = req[http::field::origin];
  if (req.count(http::field::origin) != 1 || !origin_allowed(allowed, origin)) return {};
  return std::string(origin);
}

void allow_origin(http::fields& fields, std::string_view origin) {
  fields.set(http::field::access_control_allow_origin, origin);
  auto vary = fields[http::field::vary];
  if (vary.empty()) {
    fields.set(http::field::vary, "Origin");
  } else if (!http::token_list{vary}.exists("origin")) {
    fields.set(http::field::vary, std::string(vary) + ", Origin");
  }
}

std::optional<http_response> answer_preflight(const http_request& req, const std::vector<std::string>& allowed) {
  if (req.method() != http::verb::options || req.count(http::field::origin) == 0 ||
      req.count(http::field::access_control_request_method) == 0) {
    return std::nullopt;
  }
  auto origin = allowed_origin_of(req, allowed);
  if (origin.empty()) {
    return make_error(req.version(), http::status::forbidden,
                      "origin '" + std::string(req[http::field::origin]) +
                          "' is not allowed; list it in server.cors_origins",
                      "invalid_request_error", "origin_not_allowed");
  }
  http_response res{http::status::no_content, req.version()};
  res.set(http::field::server, "strata");
  allow_origin(res, origin);
  res.set(http::field::access_control_allow_methods, "GET, POST, OPTIONS");
  // The headers the page asks for (the SDKs send their own besides Authorization and
  // Content-Type); the origin is trusted, and the endpoints ignore headers they do not know.
  auto asked = req[http::field::access_control_request_headers];
  res.set(http::field::access_control_allow_headers,
          is_header_name_list(asked) ? std::string_view(asked) : default_allowed_headers);
  res.set(http::field::access_control_max_age, preflight_max_age);
  res.prepare_payload();
  return res;
}

}  // namespace strata::io
