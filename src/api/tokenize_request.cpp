#include "src/api/tokenize_request.hpp"

#include <limits>

#include "src/api/json_reader.hpp"

namespace strata::api::schema {

api_result<tokenize_request> parse_tokenize_request(std::string_view body, const parse_limits& limits) {
  tokenize_request req;
  bool has_content = false;
  api_status st = for_each_root_member(body, [&](std::string_view key, od::value& v) -> api_status {
    std::optional<bool> flag;
    if (key == "content" || key == "prompt") {
      std::optional<std::string> s;
      if (auto e = read_string(v, key, s)) return e;
      if (s) {
        req.content = std::move(*s);
        has_content = true;
      }
      return std::nullopt;
    }
    if (key == "model") {
      std::optional<std::string> s;
      if (auto e = read_string(v, key, s)) return e;
      req.model = s.value_or("");
      return std::nullopt;
    }
    bool* target = key == "add_special"     ? &req.add_special
                   : key == "parse_special" ? &req.parse_special
                   : key == "with_pieces"   ? &req.with_pieces
                                            : nullptr;
    if (!target) return skip_value(v, 2);
    if (auto e = read_bool(v, key, flag)) return e;
    if (flag) *target = *flag;
    return std::nullopt;
  }, limits);
  if (st) return std::move(*st);
  if (!has_content) return invalid_request("content", "content is required");
  return req;
}

api_result<detokenize_request> parse_detokenize_request(std::string_view body, const parse_limits& limits) {
  detokenize_request req;
  bool has_tokens = false;
  api_status st = for_each_root_member(body, [&](std::string_view key, od::value& v) -> api_status {
    if (key != "tokens") return skip_value(v, 2);
    has_tokens = true;
    req.tokens.clear();
    return for_each_element(v, "tokens", 2, [&](std::size_t i, od::value& t) -> api_status {
      std::optional<std::int64_t> id;
      std::string param = "tokens[" + std::to_string(i) + "]";
      if (auto e = read_integer(t, param, 0, std::numeric_limits<std::int32_t>::max(), id)) return e;
      if (!id) return invalid_request(param, param + " must be an integer");
      req.tokens.push_back(static_cast<std::int32_t>(*id));
      return std::nullopt;
    });
  }, limits);
  if (st) return std::move(*st);
  if (!has_tokens) return invalid_request("tokens", "tokens is required");
  return req;
}

}  // namespace strata::api::schema
