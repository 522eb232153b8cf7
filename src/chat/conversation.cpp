#include "src/chat/conversation.hpp"

#include <boost/json.hpp>

namespace strata::chat {
namespace {

namespace json = boost::json;

bool is_role(const json::value& m, std::string_view role) {
  const json::value* r = m.is_object() ? m.as_object().if_contains("role") : nullptr;
  return r && r->is_string() && r->as_string() == role;
}

std::string content_of(const json::value& m) {
  const json::value* c = m.as_object().if_contains("content");
  return c && c->is_string() ? std::string(c->as_string()) : std::string();
}

}  // namespace

bool has_developer_role(std::string_view template_source) { return template_source.find("developer") != std::string_view::npos; }

json::array with_template_roles(const json::array& messages, bool developer_role) {
  if (developer_role) return messages;
  json::array out;
  out.reserve(messages.size());
  bool leading = true;  // every message out so far is a system message
  for (const json::value& v : messages) {
    json::value m = v;
    if (is_role(m, "developer")) m.as_object()["role"] = "system";
    const bool system = is_role(m, "system");
    if (system && leading && !out.empty()) {
      json::object& head = out.back().as_object();
      head["content"] = content_of(out.back()) + "\n\n" + content_of(m);
      continue;
    }
    leading = leading && system;
    out.push_back(std::move(m));
  }
  return out;
}

bool ends_with_prefill(const json::array& messages) {
  if (messages.empty() || !is_role(messages.back(), "assistant")) return false;
  const json::object& m = messages.back().as_object();
  if (const json::value* calls = m.if_contains("tool_calls"); calls && calls->is_array() && !calls->as_array().empty()) return false;
  const json::value* c = m.if_contains("content");
  return c && c->is_string() && !c->as_string().empty();
}

result<std::string> continue_final_message(std::string rendered, std::string_view content) {
  for (std::string_view want : {content, content.substr(0, content.find_last_not_of(" \t\r\n") + 1)}) {
    if (want.empty()) continue;
    if (const auto at = rendered.rfind(want); at != std::string::npos) {
      rendered.resize(at + want.size());
      return rendered;
    }
  }
  return fail(errc::template_error, "the chat template does not write the final assistant message's content as given, so it cannot be continued");
}

}  // namespace strata::chat
