#include "src/chat/filters.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <unordered_map>

#include "src/chat/arguments.hpp"
#include "src/chat/evaluator.hpp"
#include "src/chat/operators.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat::filters {
namespace {

value trim(evaluator&, const value& v, call_args& a) {
  arguments args(a, "trim", {"chars"});
  return value(text::strip(to_str(v), args.get_string(0), true, true));
}
value upper(evaluator&, const value& v, call_args& a) {
  arguments args(a, "upper", {});
  return value(text::upper(to_str(v)));
}
value lower(evaluator&, const value& v, call_args& a) {
  arguments args(a, "lower", {});
  return value(text::lower(to_str(v)));
}
value capitalize(evaluator&, const value& v, call_args& a) {
  arguments args(a, "capitalize", {});
  return value(text::capitalize(to_str(v)));
}

// jinja2's title: a word starts at the beginning or after whitespace or one of - ( { [ <.
value title(evaluator&, const value& v, call_args& a) {
  arguments args(a, "title", {});
  std::string s = to_str(v);
  bool word_start = true;
  for (char& c : s) {
    bool sep = text::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (!sep) c = word_start ? text::upper(std::string(1, c))[0] : text::lower(std::string(1, c))[0];
    word_start = sep;
  }
  return value(std::move(s));
}

value replace(evaluator&, const value& v, call_args& a) {
  arguments args(a, "replace", {"old", "new", "count"});
  return value(text::replace(to_str(v), to_str(args.get(0)), to_str(args.get(1)), args.get_int(2, -1)));
}

value string(evaluator&, const value& v, call_args& a) {
  arguments args(a, "string", {});
  return value(to_str(v));
}

value escape(evaluator&, const value& v, call_args& a) {
  arguments args(a, "escape", {});
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return value(std::move(out));
}

value default_(evaluator&, const value& v, call_args& a) {
  arguments args(a, "default", {"default_value", "boolean"});
  bool use_default = args.get_bool(1, false) ? !v.truthy() : v.is_undefined();
  return use_default ? args.get_or(0, value(std::string())) : v;
}

value tojson(evaluator&, const value& v, call_args& a) {
  arguments args(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  json_options opt;
  opt.ensure_ascii = args.get_bool(0, false);
  value indent = args.get(1);
  if (indent.is_int() || indent.is_bool()) opt.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, args.get_int(1, 0))), ' ');
  else if (indent.is_string()) opt.indent = indent.as_string();
  else if (!indent.is_undefined() && !indent.is_none()) throw_template_error("tojson(): indent must be an integer or a string");
  value seps = args.get(2);
  if (seps.is_list() && seps.as_list().size() == 2 && seps.as_list()[0].is_string() && seps.as_list()[1].is_string()) {
    opt.item_separator = seps.as_list()[0].as_string();
    opt.key_separator = seps.as_list()[1].as_string();
  } else if (!seps.is_undefined() && !seps.is_none()) {
    throw_template_error("tojson(): separators must be a pair of strings");
  }
  opt.sort_keys = args.get_bool(3, false);
  return value(to_json(v, opt));
}

// Python's int(str): optional sign and surrounding whitespace, digits with single underscores.
std::optional<std::int64_t> parse_int(const std::string& s, int base) {
  std::string t = text::strip(s, std::nullopt, true, true);
  std::string digits;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() && t[i - 1] != '_') continue;
    digits += t[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || *end != '\0' || end == digits.c_str()) return std::nullopt;
  return r;
}

std::optional<double> parse_float(const std::string& s) {
  std::string t = text::strip(s, std::nullopt, true, true);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

std::optional<std::int64_t> double_to_int(double d) {
  if (!(d > -9.2e18 && d < 9.2e18)) return std::nullopt;
  return static_cast<std::int64_t>(std::trunc(d));
}

value int_(evaluator&, const value& v, call_args& a) {
  arguments args(a, "int", {"default", "base"});
  require_defined(v);
  value fallback = args.get_or(0, value(0));
  if (v.is_int()) return v;
  if (v.is_bool()) return value(v.as_bool() ? 1 : 0);
  if (v.is_float()) {
    auto i = double_to_int(v.as_double());
    return i ? value(*i) : fallback;
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), static_cast<int>(args.get_int(1, 10)))) return value(*i);
    if (auto d = parse_float(v.as_string())) {
      if (auto i = double_to_int(*d)) return value(*i);
    }
  }
  return fallback;
}

value float_(evaluator&, const value& v, call_args& a) {
  arguments args(a, "float", {"default"});
  require_defined(v);
  if (v.is_number()) return value(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.as_string())) return value(*d);
  }
  return args.get_or(0, value(0.0));
}

value abs_(evaluator&, const value& v, call_args& a) {
  arguments args(a, "abs", {});
  if (v.is_float()) return value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    std::int64_t i = v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
    if (i == INT64_MIN) throw_template_error("integer overflow");
    return value(i < 0 ? -i : i);
  }
  throw_template_error("bad operand type for abs(): '", std::string(v.type_name()), "'");
}

value round_(evaluator&, const value& v, call_args& a) {
  arguments args(a, "round", {"precision", "method"});
  std::int64_t precision = args.get_int(0, 0);
  std::string method = args.get_string(1).value_or("common");
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_template_error("method must be common, ceil or floor");
  }
  require_defined(v);
  if (!v.is_number()) throw_template_error("type ", std::string(v.type_name()), " doesn't define __round__ method");
  if (method == "common" && !v.is_float() && precision >= 0) return value(v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int());
  double x = v.as_double();
  if (method == "common") {
    if (precision < 0 || precision > 300) {
      double scale = std::pow(10.0, static_cast<double>(precision));
      return value(std::nearbyint(x * scale) / scale);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
    return value(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
  return value(r / scale);
}

value indent(evaluator&, const value& v, call_args& a) {
  arguments args(a, "indent", {"width", "first", "blank"});
  require_defined(v);
  if (!v.is_string()) throw_template_error("unsupported operand type(s) for +=: '", std::string(v.type_name()), "' and 'str'");
  value width = args.get_or(0, value(4));
  std::string pad = width.is_string() ? width.as_string()
                                      : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, args.get_int(0, 4))), ' ');
  bool first = args.get_bool(1, false), blank = args.get_bool(2, false);
  auto lines = text::split(to_str(v) + "\n", std::string("\n"), -1);
  lines.pop_back();  // the piece after the newline added above
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    if (i == 0 ? first : (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  return value(std::move(out));
}

value center(evaluator&, const value& v, call_args& a) {
  arguments args(a, "center", {"width"});
  std::string s = to_str(v);
  auto len = static_cast<std::int64_t>(text::length(s));
  std::int64_t width = std::min<std::int64_t>(args.get_int(0, 80), 1 << 20);
  if (width <= len) return value(std::move(s));
  std::int64_t total = width - len;
  std::int64_t left = total / 2 + (total & width & 1);
  return value(std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(total - left), ' '));
}

// Words as jinja2 counts them (runs of \w); bytes of non-ASCII characters count as word bytes.
value wordcount(evaluator&, const value& v, call_args& a) {
  arguments args(a, "wordcount", {});
  std::string s = to_str(v);
  std::int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    bool word = u >= 0x80 || std::isalnum(u) || c == '_';
    if (word && !in_word) ++n;
    in_word = word;
  }
  return value(n);
}

value format(evaluator&, const value& v, call_args& a) {
  if (!a.named.empty()) throw_template_error("format filter with keyword arguments is not supported");
  return value(percent_format(to_str(v), value::tuple(a.positional)));
}

value safe(evaluator&, const value& v, call_args& a) {
  arguments args(a, "safe", {});
  return v.is_string() ? v : value(to_str(v));
}

value attr(evaluator&, const value& v, call_args& a) {
  arguments args(a, "attr", {"name"});
  return get_attribute(v, to_str(args.get(0)));
}

const std::unordered_map<std::string_view, filter_fn>& table() {
  static const std::unordered_map<std::string_view, filter_fn> t = {
      {"trim", trim},         {"upper", upper},       {"lower", lower},         {"capitalize", capitalize},
      {"title", title},       {"replace", replace},   {"string", string},       {"escape", escape},
      {"e", escape},          {"default", default_},  {"d", default_},          {"tojson", tojson},
      {"int", int_},          {"float", float_},      {"abs", abs_},            {"round", round_},
      {"indent", indent},     {"center", center},     {"format", format},       {"safe", safe},
      {"attr", attr},         {"length", length},     {"count", length},        {"first", first},
      {"last", last},         {"join", join},         {"list", list},           {"items", items},
      {"dictsort", dictsort}, {"unique", unique},     {"reverse", reverse},     {"sort", sort},
      {"map", map},           {"select", select},     {"reject", reject},       {"selectattr", selectattr},
      {"rejectattr", rejectattr}, {"sum", sum},       {"min", min},             {"max", max},
      {"batch", batch},       {"wordcount", wordcount},
  };
  return t;
}

}  // namespace

filter_fn find(std::string_view name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

}  // namespace strata::chat::filters

namespace strata::chat {

value evaluator::apply_filter(const std::string& name, const value& operand, call_args& args) {
  filters::filter_fn fn = filters::find(name);
  if (!fn) throw_template_error("No filter named '", name, "'.");
  return fn(*this, operand, args);
}

}  // namespace strata::chat
