#include "src/chat/lexer.hpp"

#include <cstdlib>
#include <string_view>

#include "src/chat/template_exception.hpp"
#include "src/common/utf8.hpp"
#include "src/chat/text.hpp"

namespace strata::chat {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Python's string-literal escapes; an unknown escape keeps its backslash.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    switch (c) {
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\n': break;
      case 'x':
      case 'u':
      case 'U': {
        std::size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        bool ok = true;
        for (std::size_t k = 1; ok && k <= n; ++k) ok = i + k < s.size() && is_hex(s[i + k]);
        if (!ok) throw template_exception("invalid \\" + std::string(1, c) + " escape in a string literal");
        unsigned long cp = std::strtoul(std::string(s.substr(i + 1, n)).c_str(), nullptr, 16);
        if (cp > 0x10FFFF) throw template_exception("invalid code point in a string literal");
        utf8::append(out, cp);
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          unsigned long cp = 0;
          std::size_t k = 0;
          while (k < 3 && i + k < s.size() && s[i + k] >= '0' && s[i + k] <= '7') cp = cp * 8 + static_cast<unsigned long>(s[i + k++] - '0');
          utf8::append(out, cp);
          i += k - 1;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

lexer::lexer(std::string source) {
  // jinja2 normalizes newlines and drops one trailing newline (keep_trailing_newline=False).
  src_.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src_ += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src_ += source[i];
    }
  }
  if (!src_.empty() && src_.back() == '\n') src_.pop_back();
}

std::vector<token> lexer::tokenize() {
  while (pos_ < src_.size()) lex_text();
  emit(token_kind::eof, "", line_);
  return std::move(out_);
}

void lexer::emit(token_kind kind, std::string text, int line) { out_.push_back(token{kind, std::move(text), line}); }

void lexer::advance_to(std::size_t pos) {
  for (; pos_ < pos; ++pos_) {
    if (src_[pos_] == '\n') ++line_;
  }
}

void lexer::fail(const std::string& message) const { throw template_exception(message, line_); }

// Applies `-` (strip all whitespace before the tag) or lstrip_blocks (strip the indentation of a
// line holding only the tag) to the text in front of a tag.
static void strip_before_tag(std::string& text, char sign, bool lstrip, bool line_starting) {
  if (sign == '-') {
    std::size_t e = text.size();
    while (e > 0 && text::is_space(text[e - 1])) --e;
    text.resize(e);
  } else if (sign != '+' && lstrip) {
    std::size_t nl = text.rfind('\n');
    std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
      bool blank = true;
      for (std::size_t i = l_pos; i < text.size() && blank; ++i) blank = text::is_space(text[i]);
      if (blank) text.resize(l_pos);
    }
  }
}

void lexer::lex_text() {
  std::size_t p = pos_;
  while (true) {
    p = src_.find('{', p);
    if (p == std::string::npos || p + 1 >= src_.size()) {
      emit(token_kind::text, src_.substr(pos_), line_);
      advance_to(src_.size());
      return;
    }
    char c = src_[p + 1];
    if (c == '{' || c == '%' || c == '#') break;
    ++p;
  }
  std::string text = src_.substr(pos_, p - pos_);
  char kind = src_[p + 1];
  std::size_t after = p + 2;
  char sign = 0;
  if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];

  // {% raw %} ... {% endraw %}
  bool raw = false;
  std::size_t raw_content = 0;
  if (kind == '%') {
    std::size_t q = after;
    while (q < src_.size() && text::is_space(src_[q])) ++q;
    if (src_.compare(q, 3, "raw") == 0 && (q + 3 >= src_.size() || !is_name_char(src_[q + 3]))) {
      q += 3;
      while (q < src_.size() && text::is_space(src_[q])) ++q;
      if (src_.compare(q, 3, "-%}") == 0) {
        q += 3;
        while (q < src_.size() && text::is_space(src_[q])) ++q;
        raw = true;
      } else if (src_.compare(q, 2, "%}") == 0) {
        q += 2;
        raw = true;
      }
      raw_content = q;
    }
  }

  strip_before_tag(text, sign, kind != '{', line_starting_);
  int line = line_;
  if (!text.empty()) emit(token_kind::text, std::move(text), line);
  advance_to(after);
  line_starting_ = false;
  if (kind == '#') {
    lex_comment(after);
  } else if (raw) {
    lex_raw(raw_content);
  } else {
    emit(kind == '{' ? token_kind::var_begin : token_kind::block_begin, "", line_);
    lex_tag(kind == '%');
  }
}

void lexer::lex_comment(std::size_t content_start) {
  std::size_t j = src_.find("#}", content_start);
  if (j == std::string::npos) fail("Missing end of comment tag");
  std::size_t end = j + 2;
  char sign = j > content_start ? src_[j - 1] : 0;
  if (sign == '-') {
    while (end < src_.size() && text::is_space(src_[end])) ++end;
  } else if (sign != '+' && end < src_.size() && src_[end] == '\n') {
    ++end;
  }
  line_starting_ = src_[end - 1] == '\n';
  advance_to(end);
}

void lexer::lex_raw(std::size_t content_start) {
  advance_to(content_start);
  std::size_t p = content_start;
  while (true) {
    p = src_.find("{%", p);
    if (p == std::string::npos) fail("Missing end of raw directive");
    std::size_t q = p + 2;
    char sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
    while (q < src_.size() && text::is_space(src_[q])) ++q;
    if (src_.compare(q, 6, "endraw") != 0) {
      p += 2;
      continue;
    }
    q += 6;
    while (q < src_.size() && text::is_space(src_[q])) ++q;
    std::size_t end;
    if (src_.compare(q, 3, "+%}") == 0) {
      end = q + 3;
    } else if (src_.compare(q, 3, "-%}") == 0) {
      end = q + 3;
      while (end < src_.size() && text::is_space(src_[end])) ++end;
    } else if (src_.compare(q, 2, "%}") == 0) {
      end = q + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;
    } else {
      p += 2;
      continue;
    }
    std::string text = src_.substr(content_start, p - content_start);
    strip_before_tag(text, sign, true, false);
    if (!text.empty()) emit(token_kind::text, std::move(text), line_);
    line_starting_ = src_[end - 1] == '\n';
    advance_to(end);
    return;
  }
}

bool lexer::lex_tag_end(bool block) {
  std::string_view rest = std::string_view(src_).substr(pos_);
  std::size_t end = 0;
  if (block) {
    if (rest.starts_with("+%}")) {
      end = pos_ + 3;
    } else if (rest.starts_with("-%}")) {
      end = pos_ + 3;
      while (end < src_.size() && text::is_space(src_[end])) ++end;
    } else if (rest.starts_with("%}")) {
      end = pos_ + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;
    } else {
      return false;
    }
  } else {
    if (rest.starts_with("-}}")) {
      end = pos_ + 3;
      while (end < src_.size() && text::is_space(src_[end])) ++end;
    } else if (rest.starts_with("}}")) {
      end = pos_ + 2;
    } else {
      return false;
    }
  }
  emit(block ? token_kind::block_end : token_kind::var_end, "", line_);
  line_starting_ = src_[end - 1] == '\n';
  advance_to(end);
  return true;
}

void lexer::lex_tag(bool block) {
  brackets_.clear();
  while (true) {
    while (pos_ < src_.size() && text::is_space(src_[pos_])) advance_to(pos_ + 1);
    if (pos_ >= src_.size()) fail(block ? "Unexpected end of template inside a block tag" : "Unexpected end of template inside an expression");
    if (brackets_.empty() && lex_tag_end(block)) return;
    char c = src_[pos_];
    if (is_name_start(c)) {
      std::size_t e = pos_;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      emit(token_kind::name, src_.substr(pos_, e - pos_), line_);
      advance_to(e);
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string();
    } else {
      static constexpr std::string_view two[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op(1, c);
      for (auto t : two) {
        if (std::string_view(src_).substr(pos_, 2) == t) op = std::string(t);
      }
      if (op.size() == 1 && std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
        fail("unexpected char '" + op + "'");
      }
      if (c == '(' || c == '[' || c == '{') {
        brackets_.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (c == ')' || c == ']' || c == '}') {
        if (brackets_.empty()) fail("unexpected '" + op + "'");
        if (brackets_.back() != c) fail("unexpected '" + op + "', expected '" + std::string(1, brackets_.back()) + "'");
        brackets_.pop_back();
      }
      emit(token_kind::op, op, line_);
      advance_to(pos_ + op.size());
    }
  }
}

void lexer::lex_number() {
  auto digits = [&](std::size_t p) {
    while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])))) ++p;
    return p;
  };
  std::size_t e = digits(pos_);
  bool is_float = false;
  if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
    e = digits(e + 1);
    is_float = true;
  }
  if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
    std::size_t q = e + 1;
    if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
    if (q < src_.size() && is_digit(src_[q])) {
      e = digits(q);
      is_float = true;
    }
  }
  std::string text;
  for (std::size_t i = pos_; i < e; ++i) {
    if (src_[i] != '_') text += src_[i];
  }
  emit(is_float ? token_kind::floating : token_kind::integer, std::move(text), line_);
  advance_to(e);
}

void lexer::lex_string() {
  char quote = src_[pos_];
  std::size_t p = pos_ + 1;
  while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
  if (p >= src_.size()) fail("unterminated string literal");
  int line = line_;
  std::string value;
  try {
    value = unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1));
  } catch (const template_exception& e) {
    fail(e.message());
  }
  emit(token_kind::string, std::move(value), line);
  advance_to(p + 1);
}

}  // namespace strata::chat
