#include "src/chat/tool_body.hpp"

#include <boost/json.hpp>

#include "src/chat/tool_parser.hpp"

namespace strata::chat {
namespace {

namespace json = boost::json;

std::optional<json::value> parse_json(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return std::nullopt;
  return v;
}

/// Arguments as compact JSON of an object: an object, or a string holding one.
std::optional<std::string> arguments_text(const json::value* args) {
  if (!args || args->is_null()) return std::string("{}");
  if (args->is_object()) return json::serialize(*args);
  if (args->is_string()) {
    auto inner = parse_json(args->as_string());
    if (inner && inner->is_object()) return json::serialize(*inner);
  }
  return std::nullopt;
}

std::optional<tool_call> call_of(const json::value& v) {
  if (!v.is_object()) return std::nullopt;
  const auto& o = v.as_object();
  const json::value* name = o.if_contains("name");
  if (!name || !name->is_string() || name->as_string().empty()) return std::nullopt;
  const json::value* args = o.if_contains("arguments");
  if (!args) args = o.if_contains("parameters");
  auto text = arguments_text(args);
  if (!text) return std::nullopt;
  return tool_call{{}, std::string(name->as_string()), std::move(*text)};
}

/// An object or a list of objects, each a call.
std::optional<std::vector<tool_call>> calls_of(const json::value& v) {
  std::vector<tool_call> out;
  if (v.is_array()) {
    for (const auto& e : v.as_array()) {
      auto c = call_of(e);
      if (!c) return std::nullopt;
      out.push_back(std::move(*c));
    }
    if (out.empty()) return std::nullopt;
    return out;
  }
  auto c = call_of(v);
  if (!c) return std::nullopt;
  out.push_back(std::move(*c));
  return out;
}

/// Whether `tools` declares parameter `param` of function `fn` as a string.
bool string_parameter(const json::value& tools, std::string_view fn, std::string_view param) {
  if (!tools.is_array()) return false;
  for (const auto& t : tools.as_array()) {
    const auto* f = t.is_object() ? t.as_object().if_contains("function") : nullptr;
    if (!f || !f->is_object()) continue;
    const auto* n = f->as_object().if_contains("name");
    if (!n || !n->is_string() || n->as_string() != fn) continue;
    const auto* params = f->as_object().if_contains("parameters");
    const auto* props = params && params->is_object() ? params->as_object().if_contains("properties") : nullptr;
    const auto* p = props && props->is_object() ? props->as_object().if_contains(param) : nullptr;
    const auto* type = p && p->is_object() ? p->as_object().if_contains("type") : nullptr;
    return type && type->is_string() && type->as_string() == "string";
  }
  return false;
}

std::string_view trim_newline(std::string_view s) {
  if (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

std::string_view trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::optional<std::vector<tool_call>> xml_call(std::string_view body, const json::value& tools) {
  body = trim(body);
  constexpr std::string_view open = "<function=", close = "</function>", p_open = "<parameter=", p_close = "</parameter>";
  if (body.substr(0, open.size()) != open) return std::nullopt;
  auto gt = body.find('>');
  if (gt == std::string_view::npos) return std::nullopt;
  std::string name(body.substr(open.size(), gt - open.size()));
  if (name.empty()) return std::nullopt;
  std::string_view rest = body.substr(gt + 1);
  json::object args;
  for (;;) {
    rest = trim(rest);
    if (rest == close) break;
    if (rest.substr(0, p_open.size()) != p_open) return std::nullopt;
    auto pgt = rest.find('>');
    auto end = rest.find(p_close);
    if (pgt == std::string_view::npos || end == std::string_view::npos || end < pgt) return std::nullopt;
    std::string param(rest.substr(p_open.size(), pgt - p_open.size()));
    std::string_view value = trim_newline(rest.substr(pgt + 1, end - pgt - 1));
    std::optional<json::value> v;
    if (!string_parameter(tools, name, param)) v = parse_json(value);
    args[param] = v ? std::move(*v) : json::value(json::string(value));
    rest = rest.substr(end + p_close.size());
  }
  return std::vector<tool_call>{{{}, std::move(name), json::serialize(args)}};
}

}  // namespace

std::optional<std::vector<tool_call>> parse_call_body(tool_syntax syntax, std::string_view body, const json::value& tools) {
  if (syntax == tool_syntax::qwen3_xml) return xml_call(body, tools);
  auto v = parse_json(trim(body));
  if (!v) return std::nullopt;
  if (syntax == tool_syntax::hermes) {
    auto c = call_of(*v);
    if (!c) return std::nullopt;
    return std::vector<tool_call>{std::move(*c)};
  }
  return calls_of(*v);
}

std::optional<tool_call> parse_harmony_call(std::string_view name, std::string_view body) {
  if (name.empty()) return std::nullopt;
  auto v = parse_json(trim(body));
  if (!v || !v->is_object()) return std::nullopt;
  return tool_call{{}, std::string(name), json::serialize(*v)};
}

}  // namespace strata::chat
