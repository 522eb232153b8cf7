#include "src/api/tool_fields.hpp"

#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace strata::api::schema {
namespace {

namespace json = boost::json;

/// OpenAI's rule for function names: 1 to 64 of a-z, A-Z, 0-9, '_' and '-'.
bool valid_function_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

/// The member `key` of `o` unless it is absent or null.
const json::value* present(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && !v->is_null() ? v : nullptr;
}

/// `"type": "function"`, required.
api_status check_type_function(const json::object& o, const std::string& param) {
  const json::value* type = present(o, "type");
  if (!type) return invalid_request(param + ".type", param + ".type is required");
  if (!type->is_string() || type->as_string() != "function")
    return invalid_request(param + ".type", param + ".type must be \"function\"");
  return std::nullopt;
}

/// The function's name: required, a string matching ^[a-zA-Z0-9_-]{1,64}$.
api_status check_name(const json::object& fn, const std::string& param) {
  const json::value* name = present(fn, "name");
  if (!name) return invalid_request(param, param + " is required");
  if (!name->is_string()) return invalid_request(param, param + " must be a string");
  if (!valid_function_name(name->as_string()))
    return invalid_request(param, param + " must be 1 to 64 of a-z, A-Z, 0-9, underscores and dashes");
  return std::nullopt;
}

/// `"function": {...}`, required, an object.
api_status function_of(const json::object& o, const std::string& param, const json::object*& fn) {
  const json::value* v = present(o, "function");
  if (!v) return invalid_request(param + ".function", param + ".function is required");
  if (!v->is_object()) return invalid_request(param + ".function", param + ".function must be an object");
  fn = &v->as_object();
  return std::nullopt;
}

api_status check_tool(const json::value& tool, const std::string& param) {
  if (!tool.is_object()) return invalid_request(param, param + " must be an object");
  const json::object& o = tool.as_object();
  if (auto e = check_type_function(o, param)) return e;
  const json::object* fn = nullptr;
  if (auto e = function_of(o, param, fn)) return e;
  const std::string f = param + ".function";
  if (auto e = check_name(*fn, f + ".name")) return e;
  if (auto d = present(*fn, "description"); d && !d->is_string())
    return invalid_request(f + ".description", f + ".description must be a string");
  if (auto p = present(*fn, "parameters"); p && !p->is_object())
    return invalid_request(f + ".parameters", f + ".parameters must be an object (a JSON Schema)");
  if (auto p = present(*fn, "parameters")) {
    const json::value* type = p->as_object().if_contains("type");
    if (type && !(type->is_string() && type->as_string() == "object"))
      return invalid_request(f + ".parameters", f + ".parameters must be the schema of an object: its type is \"object\"");
  }
  if (auto s = present(*fn, "strict"); s && !s->is_bool())
    return invalid_request(f + ".strict", f + ".strict must be a boolean");
  return std::nullopt;
}

/// Whether `tools` (already checked) holds a function named `name`.
bool has_function(const json::value& tools, std::string_view name) {
  if (!tools.is_array()) return false;
  for (const json::value& t : tools.as_array())
    if (t.as_object().at("function").as_object().at("name").as_string() == name) return true;
  return false;
}

}  // namespace

api_status check_tools(const json::value& tools) {
  if (tools.is_null()) return std::nullopt;
  if (!tools.is_array()) return invalid_request("tools", "tools must be an array");
  const auto& list = tools.as_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (auto e = check_tool(list[i], param)) return e;
    const auto& name = list[i].as_object().at("function").as_object().at("name").as_string();
    for (std::size_t j = 0; j < i; ++j)
      if (list[j].as_object().at("function").as_object().at("name").as_string() == name)
        return invalid_request(param + ".function.name", param + ".function.name \"" + std::string(name) +
                                                           "\" is already the name of tools[" + std::to_string(j) + "]");
  }
  return std::nullopt;
}

api_status check_tool_choice(const json::value& choice, const json::value& tools) {
  if (choice.is_null()) return std::nullopt;
  if (choice.is_string()) {
    const auto& s = choice.as_string();
    if (s == "required" && !(tools.is_array() && !tools.as_array().empty()))
      return invalid_request("tool_choice", "tool_choice \"required\" needs tools to choose from");
    if (s == "none" || s == "auto" || s == "required") return std::nullopt;
    return invalid_request("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or a named function, got \"" +
                                              std::string(s) + "\"");
  }
  if (!choice.is_object())
    return invalid_request("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or a named function");
  const json::object& o = choice.as_object();
  if (auto e = check_type_function(o, "tool_choice")) return e;
  const json::object* fn = nullptr;
  if (auto e = function_of(o, "tool_choice", fn)) return e;
  if (auto e = check_name(*fn, "tool_choice.function.name")) return e;
  const auto& name = fn->at("name").as_string();
  if (!has_function(tools, name))
    return invalid_request("tool_choice.function.name", "tool_choice.function.name \"" + std::string(name) +
                                                            "\" is not the name of a function in tools");
  return std::nullopt;
}

namespace {

/// One call of `fn` as format `f` writes it.
sampling::grammar_spec::call call_of(const chat::tool_format& f, const json::object& fn) {
  const std::string name(fn.at("name").as_string());
  const json::value* params = present(fn, "parameters");
  std::string schema = params ? json::serialize(*params) : "{}";
  switch (f.syntax) {
    case chat::tool_syntax::llama3_json: return {"{\"name\": \"" + name + "\", \"parameters\": ", std::move(schema), "}"};
    case chat::tool_syntax::json_list: return {"{\"name\": \"" + name + "\", \"arguments\": ", std::move(schema), "}"};
    case chat::tool_syntax::harmony:
      return {"<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>", std::move(schema), "<|call|>"};
    default: return {"<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ", std::move(schema), "}\n</tool_call>"};
  }
}

/// Whether any of `tools` asks for strict arguments.
bool any_strict(const json::value& tools) {
  if (!tools.is_array()) return false;
  for (const json::value& t : tools.as_array()) {
    const json::value* strict = t.as_object().at("function").as_object().if_contains("strict");
    if (strict && strict->is_bool() && strict->as_bool()) return true;
  }
  return false;
}

/// tool_choice auto (or none given) with strict tools: the model writes what it likes, but a call
/// it starts must complete with arguments that follow the tool's schema (a tool that is not
/// strict takes any object). Formats whose calls start with a marker of their own only (Hermes'
/// `<tool_call>`, harmony's commentary channel); for the others, no grammar.
sampling::grammar_spec strict_tool_grammar(const chat::tool_format& f, const json::value& tools, bool parallel) {
  sampling::grammar_spec g;
  if (!any_strict(tools)) return g;
  if (f.syntax == chat::tool_syntax::hermes) {
    g.trigger = "<tool_call>";
  } else if (f.syntax == chat::tool_syntax::harmony) {
    g.trigger = "<|channel|>commentary to=functions.";
  } else {
    return g;
  }
  g.type = sampling::grammar_spec::kind::tool_calls;
  for (const json::value& t : tools.as_array()) {
    json::object fn = t.as_object().at("function").as_object();
    const json::value* strict = fn.if_contains("strict");
    if (!(strict && strict->is_bool() && strict->as_bool())) fn.erase("parameters");
    g.calls.push_back(call_of(f, fn));
  }
  g.parallel = parallel && f.syntax == chat::tool_syntax::hermes;
  return g;
}

}  // namespace

sampling::grammar_spec forced_tool_grammar(const chat::tool_format& f, const json::value& tools, const json::value& choice, bool parallel,
                                           std::optional<sampling::grammar_spec::free_block> reasoning) {
  sampling::grammar_spec g;
  const bool required = choice.is_string() && choice.as_string() == "required";
  if (!(required || choice.is_object())) return strict_tool_grammar(f, tools, parallel);
  if (f.syntax == chat::tool_syntax::qwen3_xml || !tools.is_array()) return g;
  g.type = sampling::grammar_spec::kind::tool_calls;
  for (const json::value& t : tools.as_array()) {
    const json::object& fn = t.as_object().at("function").as_object();
    if (!required && fn.at("name") != choice.as_object().at("function").as_object().at("name")) continue;
    g.calls.push_back(call_of(f, fn));
  }
  // Llama 3's and harmony's templates take one call per turn.
  g.parallel = required && parallel && f.syntax != chat::tool_syntax::llama3_json && f.syntax != chat::tool_syntax::harmony;
  if (f.syntax == chat::tool_syntax::json_list) {
    g.prefix = f.list_marker + "[";
    g.separator = ", ";
    g.suffix = "]";
  } else if (f.syntax == chat::tool_syntax::hermes) {
    g.separator = "\n";
  }
  if (f.syntax == chat::tool_syntax::harmony) reasoning = sampling::grammar_spec::free_block{"<|channel|>analysis<|message|>", "<|end|><|start|>assistant"};
  g.reasoning = std::move(reasoning);
  return g;
}

}  // namespace strata::api::schema
