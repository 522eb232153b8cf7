#include "src/chat/tool_parser.hpp"

#include <algorithm>

#include "src/chat/tool_body.hpp"

namespace strata::chat {
namespace {

constexpr std::string_view k_space = " \t\r\n";
const std::string k_think_open = "<think>", k_think_close = "</think>";
const std::string k_tool_open = "<tool_call>", k_tool_close = "</tool_call>";
const std::string k_python_tag = "<|python_tag|>";
const std::string k_h_channel = "<|channel|>", k_h_start = "<|start|>", k_h_message = "<|message|>";
/// Harmony's ends of a message: the first two start the next message, and are not consumed.
const std::vector<std::string> k_h_ends = {k_h_start, k_h_channel, "<|end|>", "<|call|>", "<|return|>"};
/// Harmony markup outside any message: dropped.
const std::vector<std::string> k_h_stray = {k_h_message, "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"};

bool all_space(std::string_view s) { return s.find_first_not_of(k_space) == std::string_view::npos; }

/// The longest tail of `s` that is a proper prefix of one of `marks`.
std::size_t partial_tail(std::string_view s, const std::vector<std::string>& marks) {
  std::size_t best = 0;
  for (const auto& m : marks)
    for (std::size_t n = std::min(s.size(), m.size() - 1); n > best; --n)
      if (s.substr(s.size() - n) == std::string_view(m).substr(0, n)) {
        best = n;
        break;
      }
  return best;
}

/// The word after `key` in `header`, up to a space, '<' or the end.
std::string word_after(std::string_view header, std::string_view key) {
  auto p = header.find(key);
  if (p == std::string_view::npos) return {};
  auto rest = header.substr(p + key.size());
  return std::string(rest.substr(0, rest.find_first_of(" <\t\n")));
}

}  // namespace

tool_parser::tool_parser(parser_options o) : o_(std::move(o)) {
  const auto& f = o_.format;
  if (f.syntax == tool_syntax::harmony) {
    text_marks_ = {k_h_channel, k_h_start};
    text_marks_.insert(text_marks_.end(), k_h_stray.begin(), k_h_stray.end());
  } else {
    if (f.thinks) text_marks_.push_back(k_think_open);
    if (o_.parse_calls) {
      if (f.syntax == tool_syntax::hermes || f.syntax == tool_syntax::qwen3_xml) text_marks_.push_back(k_tool_open);
      if (f.syntax == tool_syntax::llama3_json) text_marks_.push_back(k_python_tag);
      if (f.syntax == tool_syntax::json_list) text_marks_.push_back(f.list_marker);
    }
  }
  if (o_.starts_in_reasoning && f.syntax != tool_syntax::harmony) mode_ = mode::reasoning;
}

std::vector<parse_event> tool_parser::feed(std::string_view text) {
  buf_ += text;
  run(false);
  return std::exchange(out_, {});
}

std::vector<parse_event> tool_parser::finish() {
  run(true);
  if (n_calls_ == 0 && !pending_ws_.empty()) emit(parse_event::kind::content, pending_ws_);
  pending_ws_.clear();
  return std::exchange(out_, {});
}

void tool_parser::run(bool at_end) {
  for (;;) {
    bool more = false;
    switch (mode_) {
      case mode::text: more = step_text(at_end); break;
      case mode::reasoning: more = step_reasoning(at_end); break;
      case mode::tagged_call: more = step_tagged(at_end); break;
      case mode::json_call: more = step_json(at_end); break;
      case mode::h_header: more = step_header(at_end); break;
      case mode::h_body: more = step_body(at_end); break;
    }
    if (!more) return;
  }
}

void tool_parser::emit(parse_event::kind k, std::string_view s) {
  if (s.empty()) return;
  if (!out_.empty() && out_.back().type == k && k != parse_event::kind::call) {
    out_.back().text += s;
    return;
  }
  parse_event e;
  e.type = k;
  e.text = std::string(s);
  out_.push_back(std::move(e));
}

void tool_parser::content(std::string_view s) {
  if (drop_ws_) {
    auto b = s.find_first_not_of(k_space);
    if (b == std::string_view::npos) return;
    s.remove_prefix(b);
    drop_ws_ = false;
  }
  if (s.empty()) return;
  if (all_space(s)) {
    pending_ws_ += s;
    return;
  }
  auto end = s.find_last_not_of(k_space) + 1;
  std::string text = std::exchange(pending_ws_, {});
  text += s.substr(0, end);
  pending_ws_ = std::string(s.substr(end));
  any_content_ = true;
  emit(parse_event::kind::content, text);
}

int tool_parser::emit_until(const std::vector<std::string>& marks, parse_event::kind k, bool at_end) {
  int which = -1;
  std::size_t at = std::string::npos;
  for (std::size_t i = 0; i < marks.size(); ++i) {
    auto p = buf_.find(marks[i]);
    if (p < at) {
      at = p;
      which = static_cast<int>(i);
    }
  }
  std::size_t n = which >= 0 ? at : buf_.size() - (at_end ? 0 : partial_tail(buf_, marks));
  std::string_view head(buf_.data(), n);
  if (k == parse_event::kind::content) content(head);
  else emit(k, head);
  buf_.erase(0, n);
  return which;
}

bool tool_parser::step_text(bool at_end) {
  // Llama 3 writes a call as the whole answer: a leading '{' may open one.
  if (o_.parse_calls && o_.format.syntax == tool_syntax::llama3_json && !any_content_) {
    auto b = buf_.find_first_not_of(k_space);
    if (b != std::string::npos && buf_[b] == '{') {
      bool marked_first = false;
      for (const auto& m : text_marks_) marked_first = marked_first || buf_.find(m) < b;
      if (!marked_first) {
        content(std::string_view(buf_).substr(0, b));
        buf_.erase(0, b);
        opener_ws_ = std::exchange(pending_ws_, {});
        opener_.clear();
        mode_ = mode::json_call;
        return true;
      }
    }
  }
  int which = emit_until(text_marks_, parse_event::kind::content, at_end);
  if (which < 0) return false;
  const std::string& mark = text_marks_[static_cast<std::size_t>(which)];
  buf_.erase(0, mark.size());
  if (mark == k_think_open) {
    mode_ = mode::reasoning;
    return true;
  }
  if (mark == k_h_channel || mark == k_h_start) {
    header_ = mark;
    mode_ = mode::h_header;
    return true;
  }
  if (o_.format.syntax == tool_syntax::harmony) return true;  // stray markup: dropped
  opener_ws_ = std::exchange(pending_ws_, {});
  opener_ = mark;
  if (mark == k_tool_open) {
    closer_ = k_tool_close;
    mode_ = mode::tagged_call;
  } else {
    mode_ = mode::json_call;
    scan_ = 0;
    depth_ = 0;
    in_string_ = escaped_ = false;
  }
  return true;
}

bool tool_parser::step_reasoning(bool at_end) {
  static const std::vector<std::string> close = {k_think_close};
  int which = emit_until(close, parse_event::kind::reasoning, at_end);
  if (which < 0) {
    if (at_end) mode_ = mode::text;
    return false;
  }
  buf_.erase(0, k_think_close.size());
  mode_ = mode::text;
  drop_ws_ = true;
  return true;
}

void tool_parser::emit_call(tool_call c) {
  c.id = new_tool_call_id(o_.format);
  parse_event e;
  e.type = parse_event::kind::call;
  e.index = n_calls_++;
  e.call = std::move(c);
  out_.push_back(std::move(e));
}

void tool_parser::finish_call(std::string_view body, std::string_view raw) {
  auto calls = parse_call_body(o_.format.syntax, body, o_.tools);
  if (!calls) {
    mode_ = mode::text;
    return content(std::exchange(opener_ws_, {}) + std::string(raw));
  }
  take_calls(std::move(*calls));
}

void tool_parser::take_calls(std::vector<tool_call> calls) {
  mode_ = mode::text;
  opener_ws_.clear();
  for (auto& c : calls) emit_call(std::move(c));
  drop_ws_ = true;
}

bool tool_parser::step_tagged(bool at_end) {
  // The end tag can also sit inside the call's arguments (a JSON string may hold "</tool_call>"),
  // so the call ends at the first end tag whose body parses; while none does, more text may bring
  // the real one. At the end, a body that never parsed ends at the first end tag, as text.
  for (auto p = buf_.find(closer_); p != std::string::npos; p = buf_.find(closer_, p + 1)) {
    auto calls = parse_call_body(o_.format.syntax, std::string_view(buf_).substr(0, p), o_.tools);
    if (!calls) continue;
    buf_.erase(0, p + closer_.size());
    take_calls(std::move(*calls));
    return true;
  }
  if (!at_end) return false;
  auto p = buf_.find(closer_);
  std::string body = buf_.substr(0, p);
  std::string raw = opener_ + body + (p == std::string::npos ? "" : closer_);
  buf_.erase(0, p == std::string::npos ? buf_.size() : p + closer_.size());
  finish_call(body, raw);
  return true;
}

bool tool_parser::step_json(bool at_end) {
  // Scans for the end of one JSON value (an object or a list) from its first bracket.
  std::size_t end = std::string::npos;
  for (; scan_ < buf_.size(); ++scan_) {
    char c = buf_[scan_];
    if (depth_ == 0) {
      if (k_space.find(c) != std::string_view::npos) continue;
      if (c != '{' && c != '[') break;  // not a value: given back as content below
    }
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '"') in_string_ = true;
    else if (c == '{' || c == '[') ++depth_;
    else if ((c == '}' || c == ']') && --depth_ == 0) {
      end = scan_ + 1;
      break;
    }
  }
  bool not_json = end == std::string::npos && scan_ < buf_.size();
  if (end == std::string::npos && !not_json && !at_end) return false;
  if (not_json) {
    content(std::exchange(opener_ws_, {}) + opener_);
    mode_ = mode::text;
    return true;
  }
  if (end == std::string::npos) end = buf_.size();
  std::string body = buf_.substr(0, end);
  buf_.erase(0, end);
  finish_call(body, opener_ + body);
  return true;
}

bool tool_parser::step_header(bool at_end) {
  auto p = buf_.find(k_h_message);
  if (p == std::string::npos) {
    if (at_end) {  // a header cut off: markup only
      buf_.clear();
      mode_ = mode::text;
    }
    return false;
  }
  header_ += buf_.substr(0, p);
  buf_.erase(0, p + k_h_message.size());
  channel_ = word_after(header_, k_h_channel);
  recipient_ = word_after(header_, "to=");
  header_.clear();
  opener_.clear();
  mode_ = mode::h_body;
  return true;
}

bool tool_parser::step_body(bool at_end) {
  const bool is_call = o_.parse_calls && recipient_.rfind("functions.", 0) == 0;
  if (is_call) {
    std::size_t at = std::string::npos, len = 0;
    for (const auto& m : k_h_ends)
      if (auto p = buf_.find(m); p < at) at = p, len = (m == k_h_start || m == k_h_channel) ? 0 : m.size();
    if (at == std::string::npos && !at_end) return false;
    std::string body = buf_.substr(0, at);
    buf_.erase(0, at == std::string::npos ? buf_.size() : at + len);
    auto c = parse_harmony_call(std::string_view(recipient_).substr(10), body);
    if (c) emit_call(std::move(*c));
    else content(body);
    mode_ = mode::text;
    return true;
  }
  auto k = channel_ == "analysis" ? parse_event::kind::reasoning : parse_event::kind::content;
  int which = emit_until(k_h_ends, k, at_end);
  if (which < 0) return false;
  const std::string& m = k_h_ends[static_cast<std::size_t>(which)];
  if (m != k_h_start && m != k_h_channel) buf_.erase(0, m.size());
  mode_ = mode::text;
  return true;
}

}  // namespace strata::chat
