#include "src/chat/operators.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {
namespace {

std::string type_of(const value& v) { return std::string(v.type_name()); }

[[noreturn]] void unsupported(std::string_view op, const value& a, const value& b) {
  throw_template_error("unsupported operand type(s) for ", std::string(op), ": '", type_of(a), "' and '", type_of(b), "'");
}

bool is_intlike(const value& v) { return v.is_int() || v.is_bool(); }
std::int64_t int_of(const value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

// Reads `*r` only after the overflow check has run (argument evaluation order is unspecified,
// so the result cannot be passed by value beside the flag that computes it).
std::int64_t checked(bool overflow, const std::int64_t* r) {
  if (overflow) throw_template_error("integer overflow");
  return *r;
}

value repeat(const value& seq, std::int64_t n, std::size_t max_size) {
  if (n <= 0) return seq.is_string() ? value(std::string()) : value(value_list{});
  std::size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
  if (unit != 0 && static_cast<std::uint64_t>(n) > max_size / unit) throw_template_error("result of repetition is too large");
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out += seq.as_string();
    return value(std::move(out));
  }
  value_list out;
  for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return value(std::move(out));
}

double float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

bool equal_impl(const value& a, const value& b, int depth) {
  if (depth > max_value_depth) throw_template_error("value nesting is too deep");
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return int_of(a) == int_of(b);
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case value_kind::undefined:
    case value_kind::none: return true;
    case value_kind::string: return a.as_string() == b.as_string();
    case value_kind::list: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal_impl(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case value_kind::dict: {
      if (a.as_dict().size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : a.as_dict()) {
        const value* other = b.as_dict().find(k);
        if (!other || !equal_impl(v, *other, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

// Python's ordering: <0, 0, >0; throws for unorderable mixes.
int order(const value& a, const value& b, std::string_view op, int depth) {
  if (depth > max_value_depth) throw_template_error("value nesting is too deep");
  require_defined(a);
  require_defined(b);
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b) ? 1 : 0;
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal_impl(x[i], y[i], depth + 1)) return order(x[i], y[i], op, depth + 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw_template_error("'", std::string(op), "' not supported between instances of '", type_of(a), "' and '", type_of(b), "'");
}

}  // namespace

void require_defined(const value& v) {
  if (v.is_undefined()) throw template_exception(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

value unary_operation(std::string_view op, const value& a) {
  require_defined(a);
  if (!a.is_number()) throw_template_error("bad operand type for unary ", std::string(op), ": '", type_of(a), "'");
  if (op == "+") return is_intlike(a) ? value(int_of(a)) : a;
  if (is_intlike(a)) {
    if (int_of(a) == INT64_MIN) throw_template_error("integer overflow");
    return value(-int_of(a));
  }
  return value(-a.as_double());
}

value binary_operation(std::string_view op, const value& a, const value& b, std::size_t max_size) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    if (s.size() > max_size) throw_template_error("result of concatenation is too large");
    return value(std::move(s));
  }
  require_defined(a);
  require_defined(b);
  std::int64_t r = 0;
  if (op == "+") {
    if (a.is_string() || b.is_string()) {
      if (!a.is_string() || !b.is_string()) {
        if (a.is_string()) throw_template_error("can only concatenate str (not \"", type_of(b), "\") to str");
        unsupported(op, a, b);
      }
      if (a.as_string().size() + b.as_string().size() > max_size) throw_template_error("result of concatenation is too large");
      return value(a.as_string() + b.as_string());
    }
    if (a.is_list() || b.is_list()) {
      if (!a.is_list() || !b.is_list()) {
        if (a.is_list()) throw_template_error("can only concatenate list (not \"", type_of(b), "\") to list");
        unsupported(op, a, b);
      }
      if (a.as_list().size() + b.as_list().size() > max_size) throw_template_error("result of concatenation is too large");
      value_list out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && is_intlike(b)) return repeat(a, int_of(b), max_size);
    if ((b.is_string() || b.is_list()) && is_intlike(a)) return repeat(b, int_of(a), max_size);
  }
  if (op == "%" && a.is_string()) return value(percent_format(a.as_string(), b));
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  const bool ints = is_intlike(a) && is_intlike(b);
  const double x = a.as_double(), y = b.as_double();
  if (op == "+") return ints ? value(checked(__builtin_add_overflow(int_of(a), int_of(b), &r), &r)) : value(x + y);
  if (op == "-") return ints ? value(checked(__builtin_sub_overflow(int_of(a), int_of(b), &r), &r)) : value(x - y);
  if (op == "*") return ints ? value(checked(__builtin_mul_overflow(int_of(a), int_of(b), &r), &r)) : value(x * y);
  if (op == "/") {
    if (y == 0) throw_template_error("division by zero");
    return value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) throw_template_error(ints ? "integer division or modulo by zero" : "float division by zero");
    if (ints) {
      std::int64_t p = int_of(a), q = int_of(b);
      if (p == INT64_MIN && q == -1) throw_template_error("integer overflow");
      std::int64_t quot = p / q, rem = p % q;
      if (rem != 0 && ((rem < 0) != (q < 0))) {
        quot -= 1;
        rem += q;
      }
      return op == "//" ? value(quot) : value(rem);
    }
    return op == "//" ? value(std::floor(x / y)) : value(float_mod(x, y));
  }
  if (op == "**") {
    if (ints && int_of(b) >= 0) {
      std::int64_t base = int_of(a), e = int_of(b), acc = 1;
      while (e > 0) {
        if (e & 1) acc = checked(__builtin_mul_overflow(acc, base, &r), &r);
        e >>= 1;
        if (e > 0) base = checked(__builtin_mul_overflow(base, base, &r), &r);
      }
      return value(acc);
    }
    if (x == 0 && y < 0) throw_template_error("0.0 cannot be raised to a negative power");
    return value(std::pow(x, y));
  }
  unsupported(op, a, b);
}

bool values_equal(const value& a, const value& b) { return equal_impl(a, b, 0); }

bool less_than(const value& a, const value& b) { return order(a, b, "<", 0) < 0; }

bool contains(const value& container, const value& item) {
  switch (container.kind()) {
    case value_kind::undefined: return false;
    case value_kind::string:
      if (!item.is_string()) throw_template_error("'in <string>' requires string as left operand, not ", type_of(item));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case value_kind::list:
      for (const auto& v : container.as_list()) {
        if (values_equal(v, item)) return true;
      }
      return false;
    case value_kind::dict:
    case value_kind::name_space:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default: throw_template_error("argument of type '", type_of(container), "' is not iterable");
  }
}

bool compare_values(std::string_view op, const value& a, const value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  int c = order(a, b, op, 0);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

std::string percent_format(const std::string& format, const value& args) {
  // Python spreads only a tuple over the fields; a list or dict is one argument that may also go
  // unused (Python treats it as a mapping for `%(name)s` fields).
  value_list list = args.is_tuple() ? args.as_list() : value_list{args};
  const bool may_go_unused = !args.is_tuple() && (args.is_list() || args.is_dict());
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    std::size_t j = i + 1;
    while (j < format.size() && std::string_view("-+ #0123456789.").find(format[j]) != std::string_view::npos) ++j;
    if (j >= format.size()) throw_template_error("incomplete format");
    char conv = format[j];
    std::string spec = format.substr(i, j - i);
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= list.size()) throw_template_error("not enough arguments for format string");
    const value& v = list[next++];
    char buf[512];
    auto as_ll = [&]() -> long long {
      if (!v.is_float()) return int_of(v);
      double d = std::trunc(v.as_double());
      if (!(d > -9.2e18 && d < 9.2e18)) throw_template_error("number is out of range for %", std::string(1, conv));
      return static_cast<long long>(d);
    };
    switch (conv) {
      case 's':
      case 'r': {
        std::string s = conv == 's' ? to_str(v) : to_repr(v);
        std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
        out += spec.size() == 1 ? s : std::string(buf);
        break;
      }
      case 'd':
      case 'i':
        if (!v.is_number()) throw_template_error("%", std::string(1, conv), " format: a real number is required, not ", type_of(v));
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(), as_ll());
        out += buf;
        break;
      case 'f':
      case 'e':
      case 'g':
      case 'x':
        if (!v.is_number()) throw_template_error("%", std::string(1, conv), " format: a real number is required, not ", type_of(v));
        if (conv == 'x') std::snprintf(buf, sizeof buf, (spec + "llx").c_str(), as_ll());
        else std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.as_double());
        out += buf;
        break;
      default: throw_template_error("unsupported format character '", std::string(1, conv), "'");
    }
  }
  if (next < list.size() && !may_go_unused) throw_template_error("not all arguments converted during string formatting");
  return out;
}

}  // namespace strata::chat
