#include "src/chat/methods.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "src/chat/arguments.hpp"
#include "src/chat/operators.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {
namespace {

value string_list(std::vector<std::string> parts) {
  value_list out;
  for (auto& p : parts) out.emplace_back(std::move(p));
  return value(std::move(out));
}

bool matches_affix(const value& self, const value& affix, bool prefix) {
  const std::string& s = self.as_string();
  auto test = [&](const value& a) {
    if (!a.is_string()) throw_template_error(prefix ? "startswith" : "endswith", " first arg must be str or a tuple of str");
    const std::string& x = a.as_string();
    return prefix ? std::string_view(s).starts_with(x) : std::string_view(s).ends_with(x);
  };
  if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), test);
  return test(affix);
}

std::int64_t find_cp(const std::string& s, const std::string& sub, bool reverse) {
  std::size_t pos = reverse ? s.rfind(sub) : s.find(sub);
  if (pos == std::string::npos) return -1;
  return static_cast<std::int64_t>(text::length(std::string_view(s).substr(0, pos)));
}

bool all_chars(const std::string& s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}

value string_method(const value& self, const std::string& name, call_args& a) {
  const std::string& s = self.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    arguments args(a, name, {"chars"});
    return value(text::strip(s, args.get_string(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    arguments args(a, name, {"sep", "maxsplit"});
    auto sep = args.get_string(0);
    if (sep && sep->empty()) throw_template_error("empty separator");
    std::int64_t maxsplit = args.get_int(1, -1);
    if (name == "rsplit" && maxsplit >= 0) {
      auto all = text::split(s, sep, -1);
      if (static_cast<std::int64_t>(all.size()) > maxsplit + 1) {
        std::size_t keep = all.size() - static_cast<std::size_t>(maxsplit);
        std::string head = all[0];
        for (std::size_t i = 1; i < keep; ++i) head += (sep ? *sep : " ") + all[i];
        std::vector<std::string> out{head};
        out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end());
        return string_list(std::move(out));
      }
      return string_list(std::move(all));
    }
    return string_list(text::split(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    auto parts = text::split(s, std::string("\n"), -1);
    if (!parts.empty() && parts.back().empty()) parts.pop_back();
    return string_list(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    arguments args(a, name, {"affix"});
    return value(matches_affix(self, args.get(0), name == "startswith"));
  }
  if (name == "upper") return value(text::upper(s));
  if (name == "lower") return value(text::lower(s));
  if (name == "title") return value(text::title(s));
  if (name == "capitalize") return value(text::capitalize(s));
  if (name == "replace") {
    arguments args(a, name, {"old", "new", "count"});
    auto from = args.get_string(0), to = args.get_string(1);
    if (!from || !to) throw_template_error("replace() takes at least 2 arguments");
    return value(text::replace(s, *from, *to, args.get_int(2, -1)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    arguments args(a, name, {"sub"});
    auto sub = args.get_string(0);
    if (!sub) throw_template_error(name, "() argument must be str");
    std::int64_t r = find_cp(s, *sub, name[0] == 'r');
    if (r < 0 && name.find("index") != std::string::npos) throw_template_error("substring not found");
    return value(r);
  }
  if (name == "count") {
    arguments args(a, name, {"sub"});
    auto sub = args.get_string(0);
    if (!sub) throw_template_error("count() argument must be str");
    if (sub->empty()) return value(static_cast<std::int64_t>(text::length(s) + 1));
    std::int64_t n = 0;
    for (std::size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
    return value(n);
  }
  if (name == "join") {
    arguments args(a, name, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : args.get(0).is_list() ? args.get(0).as_list() : value_list{}) {
      if (!item.is_string()) throw_template_error("sequence item: expected str instance, ", std::string(item.type_name()), " found");
      if (!first) out += s;
      first = false;
      out += item.as_string();
    }
    return value(std::move(out));
  }
  if (name == "format") return value(python_format(s, a));
  if (name == "removeprefix" || name == "removesuffix") {
    arguments args(a, name, {"affix"});
    auto affix = args.get_string(0);
    if (!affix) throw_template_error(name, "() argument must be str");
    if (name == "removeprefix") return value(std::string_view(s).starts_with(*affix) ? s.substr(affix->size()) : s);
    return value(std::string_view(s).ends_with(*affix) ? s.substr(0, s.size() - affix->size()) : s);
  }
  if (name == "partition" || name == "rpartition") {
    arguments args(a, name, {"sep"});
    auto sep = args.get_string(0);
    if (!sep) throw_template_error(name, "() argument must be str");
    if (sep->empty()) throw_template_error("empty separator");
    std::size_t pos = name == "partition" ? s.find(*sep) : s.rfind(*sep);
    if (pos == std::string::npos) {
      return name == "partition" ? value::tuple(value_list{value(s), value(""), value("")})
                                 : value::tuple(value_list{value(""), value(""), value(s)});
    }
    return value::tuple(value_list{value(s.substr(0, pos)), value(*sep), value(s.substr(pos + sep->size()))});
  }
  if (name == "zfill" || name == "ljust" || name == "rjust" || name == "center") {
    arguments args(a, name, {"width", "fillchar"});
    auto len = static_cast<std::int64_t>(text::length(s));
    std::int64_t width = std::min<std::int64_t>(args.get_int(0, 0), 1 << 20);
    std::string fill = name == "zfill" ? "0" : args.get_string(1).value_or(" ");
    if (text::length(fill) != 1) throw_template_error("The fill character must be exactly one character long");
    if (width <= len) return value(s);
    auto total = width - len;
    auto repeat = [&](std::int64_t n) {
      std::string r;
      for (std::int64_t i = 0; i < n; ++i) r += fill;
      return r;
    };
    if (name == "ljust") return value(s + repeat(total));
    if (name == "rjust") return value(repeat(total) + s);
    if (name == "center") {
      std::int64_t left = total / 2 + (total & width & 1);
      return value(repeat(left) + s + repeat(total - left));
    }
    bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return value(sign ? s.substr(0, 1) + repeat(total) + s.substr(1) : repeat(total) + s);
  }
  if (name == "isdigit") return value(all_chars(s, [](char c) { return c >= '0' && c <= '9'; }));
  if (name == "isspace") return value(all_chars(s, text::is_space));
  if (name == "isalnum") return value(all_chars(s, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }));
  if (name == "isalpha") return value(all_chars(s, [](char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }));
  if (name == "islower") return value(text::lower(s) == s && text::upper(s) != s);
  if (name == "isupper") return value(text::upper(s) == s && text::lower(s) != s);
  throw_template_error("'str' object has no attribute '", name, "'");
}

value dict_method(const value& self, const std::string& name, call_args& a) {
  const value_dict& d = self.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    arguments args(a, name, {});
    value_list out;
    for (const auto& [k, v] : d) {
      if (name == "items") out.push_back(value::tuple(value_list{value(k), v}));
      else if (name == "keys") out.emplace_back(k);
      else out.push_back(v);
    }
    return value(std::move(out));
  }
  if (name == "get") {
    arguments args(a, name, {"key", "default"});
    value key = args.get(0);
    const value* v = key.is_string() ? d.find(key.as_string()) : nullptr;
    return v ? *v : args.get_or(1, value::none());
  }
  throw_template_error("'dict' object has no attribute '", name, "'");
}

value list_method(const value& self, const std::string& name, call_args& a) {
  arguments args(a, name, {"value"});
  const value_list& l = self.as_list();
  if (name == "count") {
    return value(static_cast<std::int64_t>(std::count_if(l.begin(), l.end(), [&](const value& v) { return values_equal(v, args.get(0)); })));
  }
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (values_equal(l[i], args.get(0))) return value(static_cast<std::int64_t>(i));
  }
  throw_template_error(to_repr(args.get(0)), " is not in list");
}

constexpr std::array<std::string_view, 34> string_methods = {
    "strip",   "lstrip",  "rstrip",  "split",  "rsplit",       "splitlines",   "startswith", "endswith",  "upper",
    "lower",   "title",   "capitalize", "replace", "find",     "rfind",        "index",      "rindex",    "count",
    "join",    "format",  "isdigit", "isspace", "isalpha",     "islower",      "isupper",    "partition", "rpartition",
    "zfill",   "ljust",   "rjust",   "center", "removeprefix", "removesuffix", "isalnum"};
constexpr std::array<std::string_view, 4> dict_methods = {"items", "keys", "values", "get"};
constexpr std::array<std::string_view, 11> mutators = {"append", "extend", "insert", "pop", "remove", "reverse",
                                                       "sort", "clear", "update", "setdefault", "popitem"};

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

value bound_method(const value& obj, const std::string& name) {
  if (obj.is_string() && one_of(string_methods, name)) {
    return value::function(name, [obj, name](call_args& a) { return string_method(obj, name, a); });
  }
  if (obj.is_dict() && one_of(dict_methods, name)) {
    return value::function(name, [obj, name](call_args& a) { return dict_method(obj, name, a); });
  }
  if (obj.is_list() && (name == "index" || name == "count")) {
    return value::function(name, [obj, name](call_args& a) { return list_method(obj, name, a); });
  }
  if ((obj.is_list() || obj.is_dict()) && one_of(mutators, name)) {
    std::string type(obj.type_name());
    return value::function(name, [name, type](call_args&) -> value {
      throw_template_error("access to attribute '", name, "' of '", type, "' object is unsafe.");
    });
  }
  return value();
}

std::string python_format(const std::string& format, const call_args& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}' ) {
      if (i + 1 < format.size() && format[i + 1] == '}') ++i;
      else throw_template_error("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    std::size_t close = format.find('}', i);
    if (close == std::string::npos) throw_template_error("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    if (field.find_first_of(":!") != std::string::npos) throw_template_error("format specs in str.format are not supported");
    const value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      std::size_t idx = field.empty() ? auto_index++ : static_cast<std::size_t>(std::strtoul(field.c_str(), nullptr, 10));
      if (idx >= args.positional.size()) throw_template_error("Replacement index ", std::to_string(idx), " out of range for positional args tuple");
      v = &args.positional[idx];
    } else {
      for (const auto& [k, val] : args.named) {
        if (k == field) v = &val;
      }
      if (!v) throw_template_error("'", field, "'");
    }
    out += to_str(*v);
  }
  return out;
}

}  // namespace strata::chat
