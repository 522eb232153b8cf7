#include "src/api/chat_request.hpp"

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include "src/api/json_reader.hpp"
#include "src/api/request_body.hpp"
#include "src/api/sampling_reader.hpp"
#include "src/api/tool_fields.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;

bool known_role(std::string_view r) {
  return r == "system" || r == "user" || r == "assistant" || r == "tool" || r == "developer";
}

// One content part, `{"type":"text","text":...}`; its members may come in any order.
api_status read_part(od::value& value, const std::string& param, std::string& text) {
  std::optional<std::string> type, part_text;
  api_status st = for_each_member(value, param, 4, [&](std::string_view key, od::value& v) -> api_status {
    if (key == "type") return read_string(v, param + ".type", type);
    if (key == "text") return read_string(v, param + ".text", part_text);
    return skip_value(v, 5);
  });
  if (st) return st;
  if (!type) return invalid_request(param + ".type", param + ".type is required");
  if (*type != "text")
    return invalid_request(param + ".type", param + ".type \"" + *type + "\" is not supported; only \"text\" is");
  if (!part_text) return invalid_request(param + ".text", param + ".text is required");
  text = std::move(*part_text);
  return std::nullopt;
}

// A message's content: a string, an array of text parts (joined with "\n"), or null.
api_status read_content(od::value& value, const std::string& param, chat_message& m) {
  api_status st;
  if (take_null(value, st) || st) {
    m.content_null = !st;
    return st;
  }
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  if (t == od::json_type::string) {
    std::optional<std::string> s;
    if ((st = read_string(value, param, s))) return st;
    m.content = std::move(*s);
    m.content_null = false;
    return std::nullopt;
  }
  if (t != od::json_type::array) return invalid_request(param, param + " must be a string or an array of content parts");
  std::string joined;
  st = for_each_element(value, param, 3, [&](std::size_t j, od::value& v) -> api_status {
    std::string text;
    if (auto e = read_part(v, param + "[" + std::to_string(j) + "]", text)) return e;
    if (j > 0) joined += '\n';
    joined += text;
    return std::nullopt;
  });
  if (st) return st;
  m.content = std::move(joined);
  m.content_null = false;
  return std::nullopt;
}

// Checks that each tool call is `{id?, type?: "function", function: {name, arguments: string}}`.
api_status check_tool_calls(const json::value& calls, const std::string& param) {
  if (!calls.is_array()) return invalid_request(param, param + " must be an array");
  std::size_t i = 0;
  for (const json::value& c : calls.as_array()) {
    std::string p = param + "[" + std::to_string(i++) + "]";
    if (!c.is_object()) return invalid_request(p, p + " must be an object");
    const json::object& o = c.as_object();
    if (auto id = o.if_contains("id"); id && !id->is_string()) return invalid_request(p + ".id", p + ".id must be a string");
    if (auto type = o.if_contains("type"); type && !(type->is_string() && type->as_string() == "function"))
      return invalid_request(p + ".type", p + ".type must be \"function\"");
    auto fn = o.if_contains("function");
    if (!fn || !fn->is_object()) return invalid_request(p + ".function", p + ".function must be an object");
    auto name = fn->as_object().if_contains("name");
    if (!name || !name->is_string()) return invalid_request(p + ".function.name", p + ".function.name must be a string");
    auto args = fn->as_object().if_contains("arguments");
    if (args && !args->is_string())
      return invalid_request(p + ".function.arguments", p + ".function.arguments must be a string");
  }
  return std::nullopt;
}

api_status read_message(od::value& value, std::size_t i, chat_message& m, json::object& j) {
  const std::string param = "messages[" + std::to_string(i) + "]";
  m.content_null = true;
  api_status st = for_each_member(value, param, 3, [&](std::string_view key, od::value& v) -> api_status {
    if (key == "role") {
      std::optional<std::string> role;
      if (auto e = read_string(v, param + ".role", role)) return e;
      m.role = role.value_or("");
      return std::nullopt;
    }
    if (key == "content") {
      return read_content(v, param + ".content", m);
    }
    if (key == "name" || key == "tool_call_id") {
      std::optional<std::string> s;
      if (auto e = read_string(v, param + "." + std::string(key), s)) return e;
      (key == "name" ? m.name : m.tool_call_id) = s.value_or("");
      if (s) j[key] = *s;
      return std::nullopt;
    }
    json::value any;
    if (auto e = read_json(v, 4, any)) return e;
    if (key == "tool_calls") {
      if (any.is_null()) {
        m.tool_calls.clear();
        j.erase("tool_calls");
        return std::nullopt;
      }
      if (auto e = check_tool_calls(any, param + ".tool_calls")) return e;
      m.tool_calls = any.as_array();
    }
    j[key] = std::move(any);  // other members (e.g. reasoning_content) stay for the template
    return std::nullopt;
  });
  if (st) return st;
  if (m.role.empty()) return invalid_request(param + ".role", param + ".role is required");
  if (!known_role(m.role))
    return invalid_request(param + ".role", param + ".role \"" + m.role +
                                                "\" is not one of system, user, assistant, tool, developer");
  if (m.content_null && m.role != "assistant")
    return invalid_request(param + ".content", param + ".content is required for role " + m.role);
  j["role"] = m.role;
  if (m.content_null) j["content"] = nullptr;
  else j["content"] = m.content;
  return std::nullopt;
}

/// `chat_template_kwargs`: null or an object of template variables, which may not replace the
/// conversation or its tools.
api_status read_template_kwargs(od::value& value, json::object& out) {
  json::value v;
  if (auto e = read_json(value, 2, v)) return e;
  if (v.is_null()) {
    out.clear();
    return std::nullopt;
  }
  if (!v.is_object()) return invalid_request("chat_template_kwargs", "chat_template_kwargs must be an object");
  for (const char* reserved : {"messages", "tools"})
    if (v.as_object().contains(reserved))
      return invalid_request("chat_template_kwargs", std::string("chat_template_kwargs may not set ") + reserved +
                                                         ": give it as the request's own field");
  out = std::move(v.as_object());
  return std::nullopt;
}

/// `reasoning_effort`: null or one of none, minimal, low, medium, high.
api_status read_reasoning_effort(od::value& value, std::optional<std::string>& out) {
  out.reset();
  if (auto e = read_string(value, "reasoning_effort", out)) return e;
  if (out && *out != "none" && *out != "minimal" && *out != "low" && *out != "medium" && *out != "high")
    return invalid_request("reasoning_effort", "reasoning_effort must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\", got \"" +
                                                   *out + "\"");
  return std::nullopt;
}

}  // namespace

api_result<chat_request> parse_chat_request(std::string_view body, const parse_limits& limits) {
  chat_request req;
  json::object kwargs;
  std::optional<std::string> effort;
  sampling_reader sampling(endpoint::chat);
  bool has_messages = false;
  api_status st = read_request_body(body, limits, req.model, sampling, [&](std::string_view key, od::value& v, bool& handled) -> api_status {
    handled = true;
    if (key == "messages") {
      has_messages = true;
      req.messages.clear();
      req.messages_json.clear();
      return for_each_element(v, key, 2, [&](std::size_t i, od::value& mv) -> api_status {
        chat_message m;
        json::object j;
        if (auto e = read_message(mv, i, m, j)) return e;
        req.messages.push_back(std::move(m));
        req.messages_json.push_back(std::move(j));
        return std::nullopt;
      });
    }
    if (key == "tools") {
      json::value tools;
      if (auto e = read_json(v, 2, tools)) return e;
      if (auto e = check_tools(tools)) return e;
      req.tools = std::move(tools);
      return std::nullopt;
    }
    if (key == "chat_template_kwargs") return read_template_kwargs(v, kwargs);
    if (key == "chat_template") {
      std::optional<std::string> t;
      if (auto e = read_string(v, key, t)) return e;
      req.chat_template = t.value_or("");
      return std::nullopt;
    }
    if (key == "add_generation_prompt") return read_bool(v, key, req.add_generation_prompt);
    if (key == "continue_final_message") return read_bool(v, key, req.continue_final_message);
    if (key == "reasoning_effort") return read_reasoning_effort(v, effort);
    if (key == "tool_choice") {
      json::value choice;
      if (auto e = read_json(v, 2, choice)) return e;
      req.tool_choice = std::move(choice);  // checked against the tools once both are read
      return std::nullopt;
    }
    handled = false;
    return std::nullopt;
  });
  if (st) return std::move(*st);
  if (!has_messages) return invalid_request("messages", "messages is required");
  if (req.messages.empty()) return invalid_request("messages", "messages must hold at least one message");
  if (auto e = check_tool_choice(req.tool_choice, req.tools)) return std::move(*e);
  if (effort) req.template_kwargs["reasoning_effort"] = *effort;
  for (auto& [k, v] : kwargs) req.template_kwargs[k] = std::move(v);
  auto params = sampling.finish();
  if (!params) return std::move(params).err();
  req.sampling = std::move(params).value();
  return req;
}

}  // namespace strata::api::schema
