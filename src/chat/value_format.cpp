#include "src/chat/value_format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/common/json_escape.hpp"

namespace strata::chat {
namespace {

void check_depth(int depth) {
  if (depth > max_value_depth) throw_template_error("value nesting is too deep (over ", std::to_string(max_value_depth), " levels)");
}

std::string str_impl(const value& v, bool quoted, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case value_kind::undefined: return quoted ? "Undefined" : "";
    case value_kind::none: return "None";
    case value_kind::boolean: return v.as_bool() ? "True" : "False";
    case value_kind::integer: return std::to_string(v.as_int());
    case value_kind::floating: return format_double(v.as_double());
    case value_kind::string: return quoted ? text::repr(v.as_string()) : v.as_string();
    case value_kind::list: {
      std::string out = v.is_tuple() ? "(" : "[";
      bool first = true;
      for (const auto& item : v.as_list()) {
        if (!first) out += ", ";
        first = false;
        out += str_impl(item, true, depth + 1);
      }
      if (!v.is_tuple()) return out + "]";
      return out + (v.as_list().size() == 1 ? ",)" : ")");
    }
    case value_kind::dict:
    case value_kind::name_space: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, item] : v.as_dict()) {
        if (!first) out += ", ";
        first = false;
        out += text::repr(k) + ": " + str_impl(item, true, depth + 1);
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    case value_kind::function: return "<function " + v.function_name() + ">";
  }
  return "";
}

void json_unicode_escape(std::string& out, std::string_view s, std::size_t& i) {
  auto u = static_cast<unsigned char>(s[i]);
  std::size_t n = u >= 0xF0 ? 4 : u >= 0xE0 ? 3 : 2;
  unsigned long cp = u & (n == 4 ? 0x07 : n == 3 ? 0x0F : 0x1F);
  for (std::size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n - 1;
  char buf[32];
  if (cp >= 0x10000) {
    cp -= 0x10000;
    std::snprintf(buf, sizeof buf, "\\u%04lx\\u%04lx", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    std::snprintf(buf, sizeof buf, "\\u%04lx", cp);
  }
  out += buf;
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    auto u = static_cast<unsigned char>(c);
    if (ensure_ascii && u >= 0x80) {
      json_unicode_escape(out, s, i);
      continue;
    }
    if (!append_json_escape(out, u)) out += c;
  }
  out += '"';
}

struct json_writer {
  const json_options& opt;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  void write(const value& v, int level) {
    check_depth(level);
    const std::string item_sep = opt.item_separator.value_or(opt.indent ? "," : ", ");
    const std::string key_sep = opt.key_separator.value_or(": ");
    switch (v.kind()) {
      case value_kind::none: out += "null"; return;
      case value_kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case value_kind::integer: out += std::to_string(v.as_int()); return;
      case value_kind::floating: {
        double d = v.as_double();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += format_double(d);
        return;
      }
      case value_kind::string: json_string(out, v.as_string(), opt.ensure_ascii); return;
      case value_kind::list: {
        const auto& l = v.as_list();
        if (l.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (std::size_t i = 0; i < l.size(); ++i) {
          if (i) out += item_sep;
          if (opt.indent) newline(level + 1);
          write(l[i], level + 1);
        }
        if (opt.indent) newline(level);
        out += ']';
        return;
      }
      case value_kind::dict: {
        const auto& d = v.as_dict();
        if (d.empty()) {
          out += "{}";
          return;
        }
        std::vector<const value_dict::entry*> entries;
        for (const auto& e : d) entries.push_back(&e);
        if (opt.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        out += '{';
        for (std::size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (opt.indent) newline(level + 1);
          json_string(out, entries[i]->first, opt.ensure_ascii);
          out += key_sep;
          write(entries[i]->second, level + 1);
        }
        if (opt.indent) newline(level);
        out += '}';
        return;
      }
      default:
        throw_template_error("Object of type ", std::string(v.type_name()), " is not JSON serializable");
    }
  }
};

value from_json_impl(const boost::json::value& j, int depth) {
  check_depth(depth);
  switch (j.kind()) {
    case boost::json::kind::null: return value::none();
    case boost::json::kind::bool_: return value(j.get_bool());
    case boost::json::kind::int64: return value(static_cast<std::int64_t>(j.get_int64()));
    case boost::json::kind::uint64: {
      auto u = j.get_uint64();
      if (u <= static_cast<std::uint64_t>(INT64_MAX)) return value(static_cast<std::int64_t>(u));
      return value(static_cast<double>(u));
    }
    case boost::json::kind::double_: return value(j.get_double());
    case boost::json::kind::string: return value(std::string_view(j.get_string()));
    case boost::json::kind::array: {
      value_list l;
      l.reserve(j.get_array().size());
      for (const auto& item : j.get_array()) l.push_back(from_json_impl(item, depth + 1));
      return value(std::move(l));
    }
    case boost::json::kind::object: {
      value_dict d;
      for (const auto& [k, item] : j.get_object()) d.set(std::string(k), from_json_impl(item, depth + 1));
      return value(std::move(d));
    }
  }
  return value::none();
}

}  // namespace

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  std::size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  int exp = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      auto int_len = static_cast<std::size_t>(exp) + 1;
      if (digits.size() < int_len) digits.append(int_len - digits.size(), '0');
      out += digits.substr(0, int_len);
      out += '.';
      out += digits.size() > int_len ? digits.substr(int_len) : "0";
    } else {
      out += "0.";
      out.append(static_cast<std::size_t>(-exp - 1), '0');
      out += digits;
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

std::string to_str(const value& v) { return str_impl(v, false, 0); }
std::string to_repr(const value& v) { return str_impl(v, true, 0); }

std::string to_json(const value& v, const json_options& options) {
  json_writer w{options, {}};
  w.write(v, 0);
  return std::move(w.out);
}

value from_json(const boost::json::value& j) { return from_json_impl(j, 0); }

}  // namespace strata::chat
