#include "src/chat/text.hpp"

#include <algorithm>
#include <cstdio>

namespace strata::chat::text {
namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length in bytes of the code point starting at s[i].
std::size_t cp_len(std::string_view s, std::size_t i) {
  std::size_t n = 1;
  while (i + n < s.size() && is_continuation(static_cast<unsigned char>(s[i + n]))) ++n;
  return n;
}

char ascii_upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (static_cast<unsigned char>(c) >= 0x80);
}

}  // namespace

bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
}

std::size_t length(std::string_view s) noexcept {
  std::size_t n = 0;
  for (char c : s) n += is_continuation(static_cast<unsigned char>(c)) ? 0 : 1;
  return n;
}

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = cp_len(s, i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::size_t b = 0, e = s.size();
  if (!chars) {
    if (left) {
      while (b < e && is_space(s[b])) ++b;
    }
    if (right) {
      while (e > b && is_space(s[e - 1])) --e;
    }
    return std::string(s.substr(b, e - b));
  }
  std::vector<std::string> set = code_points(*chars);
  auto in_set = [&](std::string_view cp) { return std::find(set.begin(), set.end(), cp) != set.end(); };
  if (left) {
    while (b < e) {
      std::size_t n = cp_len(s, b);
      if (!in_set(s.substr(b, n))) break;
      b += n;
    }
  }
  if (right) {
    while (e > b) {
      std::size_t start = e - 1;
      while (start > b && is_continuation(static_cast<unsigned char>(s[start]))) --start;
      if (!in_set(s.substr(start, e - start))) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        std::size_t e = s.size();
        while (e > i && is_space(s[e - 1])) --e;
        out.emplace_back(s.substr(i, e - i));
        break;
      }
      std::size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  std::size_t start = 0;
  while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
    std::size_t pos = s.find(*sep, start);
    if (pos == std::string_view::npos) break;
    out.emplace_back(s.substr(start, pos - start));
    start = pos + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, std::int64_t count) {
  std::string out;
  if (from.empty()) {
    std::int64_t done = 0;
    for (std::size_t i = 0; i <= s.size();) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i == s.size()) break;
      std::size_t n = cp_len(s, i);
      out += s.substr(i, n);
      i += n;
    }
    return out;
  }
  std::size_t start = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    std::size_t pos = s.find(from, start);
    if (pos == std::string_view::npos) break;
    out += s.substr(start, pos - start);
    out += to;
    start = pos + from.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), ascii_upper);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), ascii_lower);
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = ascii_upper(out[0]);
  return out;
}

std::string title(std::string_view s) {
  std::string out(s);
  bool prev_letter = false;
  for (char& c : out) {
    bool letter = is_alpha(c);
    if (letter) c = prev_letter ? ascii_lower(c) : ascii_upper(c);
    prev_letter = letter || is_continuation(static_cast<unsigned char>(c));
  }
  return out;
}

std::string repr(std::string_view s) {
  char quote = (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

}  // namespace strata::chat::text
