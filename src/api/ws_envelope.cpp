#include "src/api/ws_envelope.hpp"

#include "src/api/json_reader.hpp"

namespace strata::api::schema {
namespace {

// The id token as written, without the whitespace that simdjson's raw token keeps after it.
api_status read_id(od::value& v, std::string& id_json) {
  od::json_type t;
  if (auto st = type_of(v, t)) return st;
  if (t != od::json_type::string && t != od::json_type::number) return invalid_request("id", "id must be a string or a number");
  std::string_view raw = v.raw_json_token();
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\n' || raw.back() == '\r'))
    raw.remove_suffix(1);
  // Consume the token, which also checks it: escapes of a string, digits of a number.
  if (t == od::json_type::string) {
    std::string_view s;
    if (auto ec = v.get_string().get(s)) return malformed(ec);
  } else if (auto st = skip_value(v, 2)) {
    return st;
  }
  id_json = std::string(raw);
  return std::nullopt;
}

}  // namespace

api_status parse_ws_envelope(std::string_view frame, ws_envelope& out, const parse_limits& limits) {
  out = ws_envelope{};
  std::optional<std::string> type, endpoint;
  bool has_body = false;
  api_status st = for_each_root_member(frame, [&](std::string_view key, od::value& v) -> api_status {
    if (key == "type") return read_string(v, key, type);
    if (key == "id") return read_id(v, out.id_json);
    if (key == "endpoint") return read_string(v, key, endpoint);
    if (key == "body") {
      od::json_type t;
      if (auto e = type_of(v, t)) return e;
      if (t != od::json_type::object) return invalid_request("body", "body must be an object");
      od::object o;
      std::string_view raw;
      if (auto ec = v.get_object().get(o)) return malformed(ec);
      if (auto ec = o.raw_json().get(raw)) return malformed(ec);
      out.body = std::string(raw);
      has_body = true;
      return std::nullopt;
    }
    return skip_value(v, 2);
  }, limits);
  if (st) return st;
  if (out.id_json.empty()) return invalid_request("id", "id is required");
  if (!type) return invalid_request("type", "type is required");
  if (*type == "cancel") {
    out.type = ws_envelope::kind::cancel;
    return std::nullopt;
  }
  if (*type != "request") return invalid_request("type", "type \"" + *type + "\" is not one of request, cancel");
  out.type = ws_envelope::kind::request;
  if (!endpoint) return invalid_request("endpoint", "endpoint is required");
  if (*endpoint == "chat.completions") out.endpoint = ws_envelope::target::chat_completions;
  else if (*endpoint == "completions") out.endpoint = ws_envelope::target::completions;
  else return invalid_request("endpoint", "endpoint \"" + *endpoint + "\" is not one of chat.completions, completions");
  if (!has_body) return invalid_request("body", "body is required");
  return std::nullopt;
}

}  // namespace strata::api::schema
