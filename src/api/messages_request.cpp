#include "src/api/messages_request.hpp"

#include <limits>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include "src/api/json_members.hpp"
#include "src/api/json_reader.hpp"
#include "src/api/json_writer.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;

constexpr auto at = element_param;

/// The text of a string, or of an array of {"type":"text","text":...} blocks joined with "\n".
api_status read_text(const json::value& v, const std::string& param, std::string& out) {
  return read_text_parts(v, param, {"text"}, out);
}

/// One message's content blocks, sorted into the chat messages they become.
struct blocks {
  std::string text;
  std::string thinking;
  json::array tool_calls;
  json::array tool_results;
};

api_status read_block(const json::value& b, const std::string& p, bool assistant, blocks& out) {
  if (!b.is_object()) return invalid_request(p, p + " must be an object");
  const json::object& o = b.as_object();
  const json::string* type = string_member(o, "type");
  if (!type) return invalid_request(p + ".type", p + ".type is required");
  if (*type == "text") {
    const json::string* text = string_member(o, "text");
    if (!text) return invalid_request(p + ".text", p + ".text must be a string");
    if (!out.text.empty()) out.text += '\n';
    out.text += *text;
    return std::nullopt;
  }
  if (*type == "tool_use" && assistant) {
    const json::string* id = string_member(o, "id");
    const json::string* name = string_member(o, "name");
    const json::value* input = o.if_contains("input");
    if (!id || !name) return invalid_request(p, p + " needs a string id and name");
    if (!input || !input->is_object()) return invalid_request(p + ".input", p + ".input must be an object");
    out.tool_calls.push_back(json::object{{"id", *id}, {"type", "function"},
                                          {"function", json::object{{"name", *name}, {"arguments", json::serialize(*input)}}}});
    return std::nullopt;
  }
  if (*type == "tool_result" && !assistant) {
    const json::string* id = string_member(o, "tool_use_id");
    if (!id) return invalid_request(p + ".tool_use_id", p + ".tool_use_id must be a string");
    std::string content;
    if (const json::value* c = o.if_contains("content"))
      if (auto e = read_text(*c, p + ".content", content)) return e;
    if (const json::value* err = o.if_contains("is_error"); err && err->is_bool() && err->as_bool()) content = "Error: " + content;
    out.tool_results.push_back(json::object{{"role", "tool"}, {"tool_call_id", *id}, {"content", std::move(content)}});
    return std::nullopt;
  }
  if ((*type == "thinking" || *type == "redacted_thinking") && assistant) {
    if (const json::string* t = string_member(o, "thinking")) out.thinking += *t;
    return std::nullopt;
  }
  return invalid_request(p + ".type", p + ".type \"" + std::string(*type) + "\" is not supported in a" +
                                          (assistant ? "n assistant" : " user") + " message");
}

api_status read_messages(const json::value& v, json::array& out) {
  if (!v.is_array() || v.as_array().empty()) return invalid_request("messages", "messages must be a non-empty array");
  std::size_t i = 0;
  for (const json::value& m : v.as_array()) {
    const std::string p = at("messages", i++);
    if (!m.is_object()) return invalid_request(p, p + " must be an object");
    const json::string* role = string_member(m.as_object(), "role");
    if (!role || (*role != "user" && *role != "assistant"))
      return invalid_request(p + ".role", p + ".role must be \"user\" or \"assistant\"");
    const bool assistant = *role == "assistant";
    const json::value* content = m.as_object().if_contains("content");
    if (!content) return invalid_request(p + ".content", p + ".content is required");
    blocks b;
    if (content->is_string()) {
      b.text = content->as_string();
    } else if (content->is_array()) {
      std::size_t j = 0;
      for (const json::value& block : content->as_array())
        if (auto e = read_block(block, at(p + ".content", j++), assistant, b)) return e;
    } else {
      return invalid_request(p + ".content", p + ".content must be a string or an array of content blocks");
    }
    for (auto& r : b.tool_results) out.push_back(std::move(r));
    if (assistant) {
      json::object a{{"role", "assistant"}};
      a["content"] = b.text.empty() && !b.tool_calls.empty() ? json::value(nullptr) : json::value(b.text);
      if (!b.tool_calls.empty()) a["tool_calls"] = std::move(b.tool_calls);
      if (!b.thinking.empty()) a["reasoning_content"] = std::move(b.thinking);
      out.push_back(std::move(a));
    } else if (!b.text.empty() || b.tool_results.empty()) {
      out.push_back(json::object{{"role", "user"}, {"content", std::move(b.text)}});
    }
  }
  return std::nullopt;
}

api_status read_tools(const json::value& v, json::value& out) {
  json::array tools;
  api_status st = for_each_object(v, "tools", [&](const json::object& o, const std::string& p) -> api_status {
    const json::string* name = string_member(o, "name");
    if (!name || name->empty() || name->size() > 128) return invalid_request(p + ".name", p + ".name must be a string of 1 to 128 characters");
    const json::value* schema = o.if_contains("input_schema");
    if (!schema || !schema->is_object()) return invalid_request(p + ".input_schema", p + ".input_schema must be an object");
    json::object fn{{"name", *name}, {"parameters", *schema}};
    if (const json::string* d = string_member(o, "description")) fn["description"] = *d;
    tools.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    return std::nullopt;
  });
  if (st) return st;
  out = std::move(tools);
  return std::nullopt;
}

api_status read_tool_choice(const json::value& v, const json::value& tools, messages_request& r) {
  const json::string* type = v.is_object() ? string_member(v.as_object(), "type") : nullptr;
  if (!type) return invalid_request("tool_choice", "tool_choice must be an object with a type");
  if (const json::value* d = v.as_object().if_contains("disable_parallel_tool_use"); d && d->is_bool())
    r.parallel_tool_calls = !d->as_bool();
  if (*type == "auto" || *type == "none") {
    r.tool_choice = *type;
  } else if (*type == "any") {
    r.tool_choice = "required";
  } else if (*type == "tool") {
    const json::string* name = string_member(v.as_object(), "name");
    if (!name) return invalid_request("tool_choice.name", "tool_choice.name is required with type \"tool\"");
    bool known = false;
    if (tools.is_array())
      for (const json::value& t : tools.as_array()) known = known || t.at("function").at("name").as_string() == *name;
    if (!known) return invalid_request("tool_choice.name", "tool_choice names \"" + std::string(*name) + "\", which is not one of tools");
    r.tool_choice = json::object{{"type", "function"}, {"function", json::object{{"name", *name}}}};
  } else {
    return invalid_request("tool_choice.type", "tool_choice.type must be auto, any, tool or none");
  }
  return std::nullopt;
}

api_status read_number_in(const json::value& v, std::string_view param, double lo, double hi, double& out) {
  if (!v.is_number()) return invalid_request(std::string(param), std::string(param) + " must be a number");
  out = v.to_number<double>();
  if (out < lo || out > hi) return out_of_range(param, lo, hi, false, false, out);
  return std::nullopt;
}

}  // namespace

api_result<messages_request> parse_messages_request(std::string_view body, bool count_only, const parse_limits& limits) {
  messages_request r;
  std::optional<json::value> messages, system, tools, tool_choice;
  std::optional<std::int64_t> max_tokens;
  api_status st = for_each_root_member(body, [&](std::string_view key, od::value& v) -> api_status {
    auto take = [&](std::optional<json::value>& slot) -> api_status {
      json::value any;
      if (auto e = read_json(v, 2, any)) return e;
      slot = std::move(any);
      return std::nullopt;
    };
    if (key == "model") {
      std::optional<std::string> s;
      if (auto e = read_string(v, "model", s)) return e;
      r.model = s.value_or("");
      return std::nullopt;
    }
    if (key == "messages") return take(messages);
    if (key == "system") return take(system);
    if (key == "tools") return take(tools);
    if (key == "tool_choice") return take(tool_choice);
    if (key == "max_tokens") return read_integer(v, "max_tokens", 1, std::int64_t{1} << 31, max_tokens);
    if (key == "top_k") {
      std::optional<std::int64_t> k;
      if (auto e = read_integer(v, "top_k", 0, std::int64_t{1} << 31, k)) return e;
      r.top_k = k.value_or(0);
      return std::nullopt;
    }
    if (key == "seed")
      return read_integer(v, "seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), r.seed);
    if (key == "stream") {
      std::optional<bool> b;
      if (auto e = read_bool(v, "stream", b)) return e;
      r.stream = b.value_or(false);
      return std::nullopt;
    }
    json::value any;
    if (auto e = read_json(v, 3, any)) return e;
    if (key == "temperature") return read_number_in(any, "temperature", 0.0, 1.0, r.temperature);
    if (key == "top_p") return read_number_in(any, "top_p", 0.0, 1.0, r.top_p);
    if (key == "stop_sequences") {
      if (!any.is_array()) return invalid_request("stop_sequences", "stop_sequences must be an array of strings");
      for (const json::value& s : any.as_array()) {
        if (!s.is_string() || s.as_string().empty())
          return invalid_request("stop_sequences", "stop_sequences must hold non-empty strings");
        r.stop_sequences.emplace_back(s.as_string());
      }
      return std::nullopt;
    }
    if (key == "thinking") {
      const json::string* type = any.is_object() ? string_member(any.as_object(), "type") : nullptr;
      if (!type || (*type != "enabled" && *type != "disabled"))
        return invalid_request("thinking.type", "thinking.type must be \"enabled\" or \"disabled\"");
      r.thinking = *type == "enabled";
    }
    return std::nullopt;  // metadata, service_tier and other members are accepted and ignored
  }, limits);
  if (st) return std::move(*st);
  if (r.model.empty()) return invalid_request("model", "model is required");
  if (!max_tokens && !count_only) return invalid_request("max_tokens", "max_tokens is required");
  r.max_tokens = max_tokens.value_or(0);
  if (!messages) return invalid_request("messages", "messages is required");
  if (system && !system->is_null()) {
    std::string text;
    if (auto e = read_text(*system, "system", text)) return std::move(*e);
    r.messages.push_back(json::object{{"role", "system"}, {"content", std::move(text)}});
  }
  if (auto e = read_messages(*messages, r.messages)) return std::move(*e);
  if (tools && !tools->is_null())
    if (auto e = read_tools(*tools, r.tools)) return std::move(*e);
  if (tool_choice && !tool_choice->is_null())
    if (auto e = read_tool_choice(*tool_choice, r.tools, r)) return std::move(*e);
  return r;
}

std::string_view anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string write_anthropic_error(const api_error& e) {
  json_writer w;
  w.begin_object().member("type", "error").key("error").begin_object();
  w.member("type", anthropic_error_type(e.status)).member("message", e.message).end_object().end_object();
  return w.take();
}

}  // namespace strata::api::schema
