#include "io/http_types.hpp"

#include "src/common/log.hpp"

namespace strata::io {

http_response make_json(unsigned version, http::status status, std::string body) {
  http_response res{status, version};
  res.set(http::field::server, "strata");
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

http_response make_error(unsigned version, http::status status, std::string_view message,
                         std::string_view type, std::string_view code, std::string_view param) {
  auto quoted_or_null = [](std::string_view s) {
    return s.empty() ? std::string("null") : "\"" + log::json_escape(s) + "\"";
  };
  std::string body = "{\"error\":{\"message\":\"" + log::json_escape(message) + "\",\"type\":\"" +
                     log::json_escape(type) + "\",\"param\":" + quoted_or_null(param) +
                     ",\"code\":" + quoted_or_null(code) + "}}";
  return make_json(version, status, std::move(body));
}

}  // namespace strata::io
