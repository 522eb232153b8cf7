#include "src/api/responses_request.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include "src/api/json_members.hpp"
#include "src/api/json_reader.hpp"
#include "src/api/tool_fields.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;
using kind = sampling::grammar_spec::kind;

constexpr auto at = element_param;

/// A message's content: a string, or parts of type input_text / output_text / text, joined.
api_status read_parts(const json::value& v, const std::string& param, std::string& out) {
  return read_text_parts(v, param, {"input_text", "output_text", "text"}, out);
}

/// The assistant message that function calls join: the last message when it is one made of calls.
json::object& calls_message(json::array& out) {
  if (!out.empty()) {
    json::object& last = out.back().as_object();
    if (last.at("role") == "assistant" && last.contains("tool_calls")) return last;
  }
  out.push_back(json::object{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}});
  return out.back().as_object();
}

api_status read_item(const json::value& item, const std::string& p, json::array& out) {
  if (!item.is_object()) return invalid_request(p, p + " must be an object");
  const json::object& o = item.as_object();
  const json::string* type = string_member(o, "type");
  if (!type || *type == "message") {
    const json::string* role = string_member(o, "role");
    if (!role || (*role != "user" && *role != "assistant" && *role != "system" && *role != "developer"))
      return invalid_request(p + ".role", p + ".role must be user, assistant, system or developer");
    const json::value* content = o.if_contains("content");
    if (!content) return invalid_request(p + ".content", p + ".content is required");
    std::string text;
    if (auto e = read_parts(*content, p + ".content", text)) return e;
    out.push_back(json::object{{"role", *role}, {"content", std::move(text)}});
    return std::nullopt;
  }
  if (*type == "function_call") {
    const json::string* call_id = string_member(o, "call_id");
    const json::string* name = string_member(o, "name");
    const json::string* arguments = string_member(o, "arguments");
    if (!call_id || !name || !arguments) return invalid_request(p, p + " needs string call_id, name and arguments");
    calls_message(out)["tool_calls"].as_array().push_back(
        json::object{{"id", *call_id}, {"type", "function"}, {"function", json::object{{"name", *name}, {"arguments", *arguments}}}});
    return std::nullopt;
  }
  if (*type == "function_call_output") {
    const json::string* call_id = string_member(o, "call_id");
    const json::value* output = o.if_contains("output");
    if (!call_id) return invalid_request(p + ".call_id", p + ".call_id must be a string");
    if (!output) return invalid_request(p + ".output", p + ".output is required");
    std::string text;
    if (auto e = read_parts(*output, p + ".output", text)) return e;
    out.push_back(json::object{{"role", "tool"}, {"tool_call_id", *call_id}, {"content", std::move(text)}});
    return std::nullopt;
  }
  if (*type == "reasoning") return std::nullopt;
  return invalid_request(p + ".type", p + ".type \"" + std::string(*type) + "\" is not supported; use message, function_call, " +
                                          "function_call_output or reasoning items");
}

api_status read_input(const json::value& v, json::array& out) {
  if (v.is_string()) {
    out.push_back(json::object{{"role", "user"}, {"content", v.as_string()}});
    return std::nullopt;
  }
  if (!v.is_array()) return invalid_request("input", "input must be a string or an array of items");
  std::size_t i = 0;
  for (const json::value& item : v.as_array())
    if (auto e = read_item(item, at("input", i++), out)) return e;
  return std::nullopt;
}

/// The chat check's param names the chat shape ("tools[0].function.name"): name the Responses one.
api_error responses_param(api_error e) {
  for (std::string* s : {&e.param, &e.message})
    for (auto at = s->find(".function"); at != std::string::npos; at = s->find(".function")) s->erase(at, 9);
  return e;
}

api_status read_tools(const json::value& v, json::value& out) {
  json::array tools;
  api_status st = for_each_object(v, "tools", [&](const json::object& o, const std::string& p) -> api_status {
    const json::string* type = string_member(o, "type");
    if (!type) return invalid_request(p + ".type", p + ".type is required");
    if (*type != "function")
      return invalid_request(p + ".type", p + ".type \"" + std::string(*type) + "\" is not supported; only function tools are");
    json::object fn;
    for (const char* key : {"name", "description", "parameters", "strict"})
      if (const json::value* m = o.if_contains(key)) fn[key] = *m;
    tools.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    return std::nullopt;
  });
  if (st) return st;
  out = std::move(tools);
  if (auto e = check_tools(out)) return responses_param(std::move(*e));
  return std::nullopt;
}

api_status read_tool_choice(const json::value& v, const json::value& tools, json::value& out) {
  out = v;
  if (v.is_object()) {
    const json::string* type = string_member(v.as_object(), "type");
    const json::string* name = string_member(v.as_object(), "name");
    if (!type || *type != "function" || !name)
      return invalid_request("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"name\":...}");
    out = json::object{{"type", "function"}, {"function", json::object{{"name", *name}}}};
  }
  if (auto e = check_tool_choice(out, tools)) return responses_param(std::move(*e));
  return std::nullopt;
}

/// text: {"format": {"type": "text" | "json_object" | "json_schema", name, schema, strict}}.
api_status read_text_format(const json::value& v, sampling::grammar_spec& spec) {
  const json::value* format = v.is_object() ? v.as_object().if_contains("format") : nullptr;
  if (!format || format->is_null()) return std::nullopt;
  const json::string* type = format->is_object() ? string_member(format->as_object(), "type") : nullptr;
  if (!type) return invalid_request("text.format.type", "text.format.type is required");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    spec.type = kind::json_object;
    return std::nullopt;
  }
  if (*type != "json_schema")
    return invalid_request("text.format.type", "text.format.type must be text, json_object or json_schema");
  const json::object& f = format->as_object();
  const json::string* name = string_member(f, "name");
  if (!name || name->empty()) return invalid_request("text.format.name", "text.format.name is required");
  const json::value* schema = f.if_contains("schema");
  if (schema && !schema->is_object() && !schema->is_bool()) return invalid_request("text.format.schema", "text.format.schema must be a JSON schema");
  spec.type = kind::json_schema;
  spec.text = schema ? json::serialize(*schema) : R"({"type": "object"})";
  if (const json::value* strict = f.if_contains("strict"); strict && strict->is_bool()) spec.strict = strict->as_bool();
  return std::nullopt;
}

api_status read_number_in(const json::value& v, std::string_view param, double lo, double hi, double& out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) return invalid_request(std::string(param), std::string(param) + " must be a number");
  out = v.to_number<double>();
  if (out < lo || out > hi) return out_of_range(param, lo, hi, false, false, out);
  return std::nullopt;
}

}  // namespace

api_result<responses_request> parse_responses_request(std::string_view body, const parse_limits& limits) {
  responses_request r;
  std::optional<json::value> input, tools, tool_choice, text;
  r.echo_tools = json::array();
  r.echo_tool_choice = "auto";
  r.echo_text = json::object{{"format", json::object{{"type", "text"}}}};
  api_status st = for_each_root_member(body, [&](std::string_view key, od::value& v) -> api_status {
    json::value any;
    if (auto e = read_json(v, 2, any)) return e;
    auto string_of = [&](std::string_view param, std::string& out) -> api_status {
      if (any.is_null()) return std::nullopt;
      if (!any.is_string()) return invalid_request(std::string(param), std::string(param) + " must be a string");
      out = any.as_string();
      return std::nullopt;
    };
    auto bool_of = [&](std::string_view param, bool& out) -> api_status {
      if (any.is_null()) return std::nullopt;
      if (!any.is_bool()) return invalid_request(std::string(param), std::string(param) + " must be a boolean");
      out = any.as_bool();
      return std::nullopt;
    };
    if (key == "model") return string_of("model", r.model);
    if (key == "input") input = std::move(any);
    else if (key == "tools") tools = std::move(any);
    else if (key == "tool_choice") tool_choice = std::move(any);
    else if (key == "text") text = std::move(any);
    else if (key == "instructions") {
      std::string s;
      if (auto e = string_of("instructions", s)) return e;
      r.echo_instructions = any;
      if (!s.empty()) r.instructions.push_back(json::object{{"role", "system"}, {"content", std::move(s)}});
    } else if (key == "previous_response_id") return string_of("previous_response_id", r.previous_response_id);
    else if (key == "stream") return bool_of("stream", r.stream);
    else if (key == "store") return bool_of("store", r.store);
    else if (key == "parallel_tool_calls") return bool_of("parallel_tool_calls", r.parallel_tool_calls);
    else if (key == "temperature") return read_number_in(any, "temperature", 0.0, 2.0, r.temperature);
    else if (key == "top_p") return read_number_in(any, "top_p", 0.0, 1.0, r.top_p);
    else if (key == "max_output_tokens") {
      if (any.is_null()) return std::nullopt;
      if (!any.is_int64() || any.as_int64() < 1) return invalid_request("max_output_tokens", "max_output_tokens must be a positive integer");
      r.max_output_tokens = any.as_int64();
    } else if (key == "seed") {
      if (any.is_null()) return std::nullopt;
      if (!any.is_int64()) return invalid_request("seed", "seed must be an integer");
      r.seed = any.as_int64();
    } else if (key == "metadata") r.echo_metadata = std::move(any);
    else if (key == "reasoning") {
      if (!any.is_object() && !any.is_null()) return invalid_request("reasoning", "reasoning must be an object");
      if (any.is_object()) {
        if (const json::value* effort = any.as_object().if_contains("effort"); effort && effort->is_string())
          r.reasoning_effort = effort->as_string();
      }
      r.echo_reasoning = std::move(any);
    }
    return std::nullopt;  // user, truncation, include and other members are accepted and ignored
  }, limits);
  if (st) return std::move(*st);
  if (r.model.empty()) return invalid_request("model", "model is required");
  if (!input || input->is_null()) return invalid_request("input", "input is required");
  if (auto e = read_input(*input, r.input)) return std::move(*e);
  if (tools && !tools->is_null()) {
    if (auto e = read_tools(*tools, r.tools)) return std::move(*e);
    r.echo_tools = *tools;
  }
  if (tool_choice && !tool_choice->is_null()) {
    if (auto e = read_tool_choice(*tool_choice, r.tools, r.tool_choice)) return std::move(*e);
    r.echo_tool_choice = *tool_choice;
  }
  if (text && !text->is_null()) {
    if (auto e = read_text_format(*text, r.grammar)) return std::move(*e);
    r.echo_text = *text;
  }
  return r;
}

}  // namespace strata::api::schema
