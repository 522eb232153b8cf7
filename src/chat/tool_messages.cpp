#include "src/chat/tool_messages.hpp"

#include <boost/json.hpp>

#include "src/chat/conversation.hpp"

namespace strata::chat {
namespace {

namespace json = boost::json;

std::string text_of(const json::object& m) {
  const json::value* c = m.if_contains("content");
  if (!c || c->is_null()) return {};
  if (c->is_string()) return std::string(c->as_string());
  return json::serialize(*c);
}

/// A call's arguments as a JSON object where its string holds one; otherwise as given.
json::value arguments_value(const json::value& args) {
  if (!args.is_string()) return args;
  boost::system::error_code ec;
  json::value v = json::parse(args.as_string(), ec);
  return !ec && v.is_object() ? v : args;
}

/// The calls of an assistant message as `{"name", "arguments": {...}}` objects.
json::array call_objects(const json::object& m) {
  json::array out;
  const json::value* calls = m.if_contains("tool_calls");
  if (!calls || !calls->is_array()) return out;
  for (const json::value& c : calls->as_array()) {
    const json::value* fn = c.is_object() ? c.as_object().if_contains("function") : nullptr;
    if (!fn || !fn->is_object()) continue;
    json::object call;
    if (auto* n = fn->as_object().if_contains("name")) call["name"] = *n;
    const json::value* args = fn->as_object().if_contains("arguments");
    call["arguments"] = args ? arguments_value(*args) : json::value(json::object());
    out.push_back(std::move(call));
  }
  return out;
}

/// The assistant's text followed by its calls as format `f` writes them (Hermes blocks, or a
/// JSON list after the list marker).
std::string with_calls_written(const json::object& m, const tool_format& f) {
  std::string text = text_of(m);
  json::array calls = call_objects(m);
  if (calls.empty()) return text;
  if (f.syntax == tool_syntax::json_list) return text + f.list_marker + json::serialize(calls);
  for (const json::value& call : calls) {
    if (!text.empty()) text += '\n';
    text += "<tool_call>\n" + json::serialize(call) + "\n</tool_call>";
  }
  return text;
}

/// Native templates: the calls' arguments as objects (or the calls written into the content when
/// the template does not write them); with `empty_content`, null content as "".
json::object native_message(json::object m, const tool_format& f, bool empty_content) {
  if (!f.renders_calls && m.contains("tool_calls")) {
    m["content"] = with_calls_written(m, f);
    m.erase("tool_calls");
  }
  if (json::value* c = m.if_contains("content"); empty_content && c && c->is_null()) *c = "";
  json::value* calls = m.if_contains("tool_calls");
  if (!calls || !calls->is_array()) return m;
  for (json::value& c : calls->as_array()) {
    json::value* fn = c.is_object() ? c.as_object().if_contains("function") : nullptr;
    json::value* args = fn && fn->is_object() ? fn->as_object().if_contains("arguments") : nullptr;
    if (args) *args = arguments_value(*args);
  }
  return m;
}

json::object with_role(std::string_view role, std::string content) {
  json::object m;
  m["role"] = role;
  m["content"] = std::move(content);
  return m;
}

json::array fallback_messages(const json::array& messages, const tool_format& f, const json::value& tools, bool in_first_user) {
  json::array out;
  bool after_tool = false;  // the last message out holds tool results
  for (const json::value& v : messages) {
    json::object m = v.as_object();
    const std::string role(m["role"].as_string());
    if (role == "tool") {
      std::string block = "<tool_response>\n" + text_of(m) + "\n</tool_response>";
      if (after_tool) {
        auto& prev = out.back().as_object();
        prev["content"] = std::string(prev["content"].as_string()) + "\n" + block;
      } else {
        out.push_back(with_role("user", std::move(block)));
      }
      after_tool = true;
      continue;
    }
    after_tool = false;
    if (role == "assistant") {
      m["content"] = with_calls_written(m, f);
      m.erase("tool_calls");
    } else if (m["content"].is_null()) {
      m["content"] = "";
    }
    out.push_back(std::move(m));
  }
  if (tools.is_null() || (tools.is_array() && tools.as_array().empty())) return out;
  const std::string prompt = fallback_tools_prompt(tools);
  for (auto& v : out) {
    auto& m = v.as_object();
    const auto& role = m["role"].as_string();
    if (!in_first_user && role == "system") {
      m["content"] = text_of(m) + "\n\n" + prompt;
      return out;
    }
    if (in_first_user && role == "user") {
      m["content"] = prompt + "\n\n" + text_of(m);
      return out;
    }
  }
  if (in_first_user) out.insert(out.begin(), with_role("user", prompt));
  else out.insert(out.begin(), with_role("system", prompt));
  return out;
}

}  // namespace

std::string fallback_tools_prompt(const json::value& tools) {
  std::string s =
      "# Tools\n\nYou may call one or more of the functions below to help with the user's request. Their signatures, "
      "as JSON, are within <tools></tools> tags:\n<tools>";
  if (tools.is_array())
    for (const auto& t : tools.as_array()) s += "\n" + json::serialize(t);
  s += "\n</tools>\n\nTo call a function, answer with a JSON object of its name and arguments within "
       "<tool_call></tool_call> tags, one block per call:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  return s;
}

json::array messages_for_template(const json::array& messages, const tool_format& f, const json::value& tools, bool retry) {
  if (!f.native) return fallback_messages(messages, f, tools, retry);
  json::array out;
  for (const json::value& v : messages) out.push_back(native_message(v.as_object(), f, retry));
  return out;
}

}  // namespace strata::chat

namespace strata::chat {

result<std::string> render_with_tools(const chat_template& t, const tool_format& f, const json::array& messages, const json::value& tools,
                                      const json::object& extra, std::string_view bos, std::string_view eos, bool add_generation_prompt) {
  json::object ctx = extra;
  if (f.native && !tools.is_null()) ctx["tools"] = tools;
  const json::array roles = with_template_roles(messages, f.developer_role);
  auto text = t.render_chat(messages_for_template(roles, f, tools), add_generation_prompt, bos, eos, ctx);
  if (text || (!f.native && tools.is_null())) return text;
  return t.render_chat(messages_for_template(roles, f, tools, true), add_generation_prompt, bos, eos, ctx);
}

}  // namespace strata::chat
