// The tests of `value is name(args)`: jinja2's built-in tests.

#include <cmath>
#include <unordered_map>

#include "src/chat/arguments.hpp"
#include "src/chat/evaluator.hpp"
#include "src/chat/filters.hpp"
#include "src/chat/operators.hpp"
#include "src/chat/predicates.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {
namespace {

using test_fn = bool (*)(const value&, const arguments&);

std::int64_t integer_operand(const value& v, const char* test) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  if (v.is_float() && std::floor(v.as_double()) == v.as_double() && std::fabs(v.as_double()) < 9e18) {
    return static_cast<std::int64_t>(v.as_double());
  }
  throw_template_error("the '", test, "' test needs an integer, not ", std::string(v.type_name()));
}

// `value % 2` as Python computes it (floats included: 3.5 % 2 == 1.5).
double python_mod2(const value& v, const char* test) {
  if (!v.is_float()) return static_cast<double>(integer_operand(v, test) & 1);
  double r = std::fmod(v.as_double(), 2.0);
  return r < 0 ? r + 2.0 : r;
}

struct test_entry {
  test_fn fn;
  std::vector<std::string_view> params;
};

const std::unordered_map<std::string_view, test_entry>& table() {
  static const std::unordered_map<std::string_view, test_entry> t = {
      {"defined", {[](const value& v, const arguments&) { return !v.is_undefined(); }, {}}},
      {"undefined", {[](const value& v, const arguments&) { return v.is_undefined(); }, {}}},
      {"none", {[](const value& v, const arguments&) { return v.is_none(); }, {}}},
      {"string", {[](const value& v, const arguments&) { return v.is_string(); }, {}}},
      {"number", {[](const value& v, const arguments&) { return v.is_number(); }, {}}},
      {"integer", {[](const value& v, const arguments&) { return v.is_int(); }, {}}},
      {"float", {[](const value& v, const arguments&) { return v.is_float(); }, {}}},
      {"boolean", {[](const value& v, const arguments&) { return v.is_bool(); }, {}}},
      {"true", {[](const value& v, const arguments&) { return v.is_bool() && v.as_bool(); }, {}}},
      {"false", {[](const value& v, const arguments&) { return v.is_bool() && !v.as_bool(); }, {}}},
      {"mapping", {[](const value& v, const arguments&) { return v.is_dict(); }, {}}},
      {"iterable",
       {[](const value& v, const arguments&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }, {}}},
      {"sequence",
       {[](const value& v, const arguments&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }, {}}},
      {"callable", {[](const value& v, const arguments&) { return v.is_function() || v.is_undefined(); }, {}}},
      {"odd", {[](const value& v, const arguments&) { return python_mod2(v, "odd") == 1.0; }, {}}},
      {"even", {[](const value& v, const arguments&) { return python_mod2(v, "even") == 0.0; }, {}}},
      {"divisibleby",
       {[](const value& v, const arguments& a) {
          std::int64_t d = a.get_int(0, 0);
          if (d == 0) throw_template_error("integer division or modulo by zero");
          return d == -1 || integer_operand(v, "divisibleby") % d == 0;
        },
        {"num"}}},
      {"eq", {[](const value& v, const arguments& a) { return values_equal(v, a.get(0)); }, {"other"}}},
      {"equalto", {[](const value& v, const arguments& a) { return values_equal(v, a.get(0)); }, {"other"}}},
      {"==", {[](const value& v, const arguments& a) { return values_equal(v, a.get(0)); }, {"other"}}},
      {"ne", {[](const value& v, const arguments& a) { return !values_equal(v, a.get(0)); }, {"other"}}},
      {"!=", {[](const value& v, const arguments& a) { return !values_equal(v, a.get(0)); }, {"other"}}},
      {"lt", {[](const value& v, const arguments& a) { return compare_values("<", v, a.get(0)); }, {"other"}}},
      {"lessthan", {[](const value& v, const arguments& a) { return compare_values("<", v, a.get(0)); }, {"other"}}},
      {"<", {[](const value& v, const arguments& a) { return compare_values("<", v, a.get(0)); }, {"other"}}},
      {"le", {[](const value& v, const arguments& a) { return compare_values("<=", v, a.get(0)); }, {"other"}}},
      {"<=", {[](const value& v, const arguments& a) { return compare_values("<=", v, a.get(0)); }, {"other"}}},
      {"gt", {[](const value& v, const arguments& a) { return compare_values(">", v, a.get(0)); }, {"other"}}},
      {"greaterthan", {[](const value& v, const arguments& a) { return compare_values(">", v, a.get(0)); }, {"other"}}},
      {">", {[](const value& v, const arguments& a) { return compare_values(">", v, a.get(0)); }, {"other"}}},
      {"ge", {[](const value& v, const arguments& a) { return compare_values(">=", v, a.get(0)); }, {"other"}}},
      {">=", {[](const value& v, const arguments& a) { return compare_values(">=", v, a.get(0)); }, {"other"}}},
      {"in", {[](const value& v, const arguments& a) { return contains(a.get(0), v); }, {"seq"}}},
      {"sameas",
       {[](const value& v, const arguments& a) {
          value o = a.get(0);
          if (v.identity() || o.identity()) return v.identity() == o.identity();
          return v.kind() == o.kind() && (v.is_none() || v.is_undefined() || (v.is_bool() && v.as_bool() == o.as_bool()));
        },
        {"other"}}},
      // str(value).islower() / isupper(): some cased character, and all of them in that case.
      {"lower", {[](const value& v, const arguments&) {
         std::string s = to_str(v);
         return text::lower(s) == s && text::upper(s) != s;
       }, {}}},
      {"upper", {[](const value& v, const arguments&) {
         std::string s = to_str(v);
         return text::upper(s) == s && text::lower(s) != s;
       }, {}}},
      {"escaped", {[](const value&, const arguments&) { return false; }, {}}},
      {"filter",
       {[](const value& v, const arguments&) { return v.is_string() && filters::find(v.as_string()) != nullptr; }, {}}},
  };
  return t;
}

}  // namespace

bool is_known_test(std::string_view name) { return name == "test" || table().count(name) > 0; }

bool evaluator::apply_test(const std::string& name, const value& operand, call_args& args) {
  if (name == "test") {
    arguments a(args, "test", {});
    return operand.is_string() && table().count(operand.as_string()) > 0;
  }
  auto it = table().find(name);
  if (it == table().end()) throw_template_error("No test named '", name, "'.");
  arguments a(args, name, it->second.params);
  return it->second.fn(operand, a);
}

}  // namespace strata::chat
