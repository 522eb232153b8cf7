#include "src/chat/tool_format.hpp"

#include <random>

#include "src/chat/conversation.hpp"

namespace strata::chat {
namespace {

bool has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

/// Every string the parser of `f` looks for.
std::vector<std::string> markup_of(const tool_format& f) {
  std::vector<std::string> m;
  switch (f.syntax) {
    case tool_syntax::hermes:
    case tool_syntax::qwen3_xml: m = {"<tool_call>", "</tool_call>"}; break;
    case tool_syntax::llama3_json: m = {"<|python_tag|>"}; break;
    case tool_syntax::json_list: m = {f.list_marker}; break;
    case tool_syntax::harmony: m = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"}; break;
  }
  if (f.thinks) {
    m.push_back("<think>");
    m.push_back("</think>");
  }
  return m;
}

}  // namespace

std::string tool_format::describe() const {
  const char* names[] = {"hermes", "llama3_json", "json_list", "qwen3_xml", "harmony"};
  std::string s = names[static_cast<int>(syntax)];
  if (syntax == tool_syntax::json_list) s += " " + list_marker;
  if (!native) s += " (fallback)";
  if (thinks) s += ", <think> reasoning";
  return s;
}

tool_format detect_tool_format(std::string_view src, const std::function<bool(std::string_view)>& is_control) {
  tool_format f;
  f.native = true;
  if (has(src, "<|channel|>")) {
    f.syntax = tool_syntax::harmony;
  } else if (has(src, "<function=") && has(src, "<parameter=")) {
    f.syntax = tool_syntax::qwen3_xml;
  } else if (has(src, "<tool_call>")) {
    f.syntax = tool_syntax::hermes;
  } else if (has(src, "[TOOL_CALLS]")) {
    f.syntax = tool_syntax::json_list;
    f.list_marker = "[TOOL_CALLS]";
    f.short_ids = true;
  } else if (has(src, "<|tool_call|>")) {
    f.syntax = tool_syntax::json_list;
    f.list_marker = "<|tool_call|>";
  } else if (has(src, "\"parameters\"") && (has(src, "<|python_tag|>") || has(src, "ipython"))) {
    f.syntax = tool_syntax::llama3_json;
  } else {
    f.syntax = tool_syntax::hermes;
    f.native = false;
  }
  f.renders_calls = has(src, "tool_calls");
  f.developer_role = has_developer_role(src);
  f.thinks = f.syntax != tool_syntax::harmony && has(src, "<think>") && has(src, "</think>");
  if (is_control)
    for (auto& m : markup_of(f))
      if (is_control(m)) f.control_markup.push_back(m);
  return f;
}

std::string new_tool_call_id(const tool_format& f) {
  static constexpr char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(0, 61);
  std::string id = f.short_ids ? "" : "call_";
  for (int i = 0, n = f.short_ids ? 9 : 24; i < n; ++i) id += alnum[pick(rng)];
  return id;
}

}  // namespace strata::chat
