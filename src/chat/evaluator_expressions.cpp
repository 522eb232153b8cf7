// Expression evaluation and jinja2's rules for attribute and item access.

#include <algorithm>
#include <optional>

#include "src/chat/evaluator.hpp"
#include "src/chat/methods.hpp"
#include "src/chat/operators.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {
namespace {

std::string object_type(const value& obj) {
  return obj.is_none() ? "None" : std::string(obj.type_name()) + " object";
}

value no_attribute(const value& obj, const std::string& name) {
  return value::undefined("'" + object_type(obj) + "' has no attribute '" + name + "'");
}

value no_element(const value& obj, const value& key) {
  return value::undefined(object_type(obj) + " has no element " + to_repr(key));
}

// Python slice indices for a sequence of `n` items: the positions selected.
std::vector<std::int64_t> slice_positions(std::int64_t n, const value& start_v, const value& stop_v, const value& step_v) {
  auto as_index = [](const value& v) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (v.is_int()) return v.as_int();
    if (v.is_bool()) return v.as_bool() ? 1 : 0;
    throw_template_error("slice indices must be integers or None");
  };
  std::int64_t step = as_index(step_v).value_or(1);
  if (step == 0) throw_template_error("slice step cannot be zero");
  auto clamp = [&](std::optional<std::int64_t> i, std::int64_t dflt) {
    if (!i) return dflt;
    std::int64_t x = *i;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  std::int64_t start = clamp(as_index(start_v), step < 0 ? n - 1 : 0);
  std::int64_t stop = clamp(as_index(stop_v), step < 0 ? -1 : n);
  std::vector<std::int64_t> out;
  if (step > 0) {
    for (std::int64_t i = start; i < stop; i += step) out.push_back(i);
  } else {
    for (std::int64_t i = start; i > stop; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

value_list iterate(const value& v) {
  switch (v.kind()) {
    case value_kind::undefined: return {};
    case value_kind::list: return v.as_list();
    case value_kind::dict: {
      value_list keys;
      for (const auto& [k, item] : v.as_dict()) keys.emplace_back(k);
      return keys;
    }
    case value_kind::string: {
      value_list chars;
      for (auto& cp : text::code_points(v.as_string())) chars.emplace_back(std::move(cp));
      return chars;
    }
    default: throw_template_error("'", std::string(v.type_name()), "' object is not iterable");
  }
}

value get_attribute(const value& obj, const std::string& name) {
  require_defined(obj);
  if (obj.is_namespace()) {
    const value* v = obj.as_dict().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  value method = bound_method(obj, name);
  if (!method.is_undefined()) return method;
  if (obj.is_dict()) {
    const value* v = obj.as_dict().find(name);
    if (v) return *v;
  }
  return no_attribute(obj, name);
}

value get_item(const value& obj, const value& key) {
  require_defined(obj);
  if ((obj.is_dict() || obj.is_namespace()) && key.is_string()) {
    const value* v = obj.as_dict().find(key.as_string());
    if (v) return *v;
    return get_attribute(obj, key.as_string());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    std::int64_t i = key.is_int() ? key.as_int() : (key.as_bool() ? 1 : 0);
    if (obj.is_list()) {
      auto n = static_cast<std::int64_t>(obj.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return no_element(obj, key);
      return obj.as_list()[static_cast<std::size_t>(i)];
    }
    auto cps = text::code_points(obj.as_string());
    auto n = static_cast<std::int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return no_element(obj, key);
    return value(std::move(cps[static_cast<std::size_t>(i)]));
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return no_element(obj, key);
}

value evaluator::lookup(const std::string& name, const frame_ptr& f) const {
  for (const frame* fr = f.get(); fr; fr = fr->parent.get()) {
    auto it = fr->vars.find(name);
    if (it != fr->vars.end()) return it->second;
  }
  return value::undefined("'" + name + "' is undefined");
}

call_args evaluator::eval_args(const expr& e, std::size_t first, const frame_ptr& f) {
  call_args args;
  for (std::size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], f));
  for (const auto& [k, v] : e.kwargs) args.named.emplace_back(k, eval(*v, f));
  return args;
}

value evaluator::eval_slice(const expr& e, const frame_ptr& f) {
  value obj = eval(*e.args[0], f);
  require_defined(obj);
  value parts[3];
  for (int i = 0; i < 3; ++i) {
    if (e.args[static_cast<std::size_t>(i) + 1]) parts[i] = eval(*e.args[static_cast<std::size_t>(i) + 1], f);
  }
  if (obj.is_list()) {
    const auto& l = obj.as_list();
    value_list out;
    for (auto i : slice_positions(static_cast<std::int64_t>(l.size()), parts[0], parts[1], parts[2])) {
      out.push_back(l[static_cast<std::size_t>(i)]);
    }
    return obj.is_tuple() ? value::tuple(std::move(out)) : value(std::move(out));
  }
  if (obj.is_string()) {
    auto cps = text::code_points(obj.as_string());
    std::string out;
    for (auto i : slice_positions(static_cast<std::int64_t>(cps.size()), parts[0], parts[1], parts[2])) {
      out += cps[static_cast<std::size_t>(i)];
    }
    return value(std::move(out));
  }
  // Unlike `obj[key]`, jinja2 applies a slice directly, so a failure is an error.
  throw_template_error("'", std::string(obj.type_name()), "' object is not subscriptable");
}

value evaluator::eval(const expr& e, const frame_ptr& f) {
  switch (e.kind) {
    case expr_kind::literal: return e.literal;
    case expr_kind::name: return lookup(e.name, f);
    case expr_kind::list:
    case expr_kind::tuple: {
      value_list items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, f));
      return e.kind == expr_kind::tuple ? value::tuple(std::move(items)) : value(std::move(items));
    }
    case expr_kind::dict: {
      value_dict d;
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        value key = eval(*e.args[i], f);
        if (!key.is_string()) throw_template_error("dict keys must be strings, not ", std::string(key.type_name()));
        d.set(key.as_string(), eval(*e.args[i + 1], f));
      }
      return value(std::move(d));
    }
    case expr_kind::attr: return get_attribute(eval(*e.args[0], f), e.name);
    case expr_kind::item: {
      value obj = eval(*e.args[0], f);
      return get_item(obj, eval(*e.args[1], f));
    }
    case expr_kind::slice: return charge(eval_slice(e, f));
    case expr_kind::call: {
      value fn = eval(*e.args[0], f);
      call_args args = eval_args(e, 1, f);
      return charge(call(fn, args));
    }
    case expr_kind::filter: {
      value operand = eval(*e.args[0], f);
      call_args args = eval_args(e, 1, f);
      return charge(apply_filter(e.name, operand, args));
    }
    case expr_kind::test: {
      value operand = eval(*e.args[0], f);
      call_args args = eval_args(e, 1, f);
      return value(apply_test(e.name, operand, args) != e.negated);
    }
    case expr_kind::unary: {
      value v = eval(*e.args[0], f);
      if (e.name == "not") return value(!v.truthy());
      return unary_operation(e.name, v);
    }
    case expr_kind::binary: {
      value left = eval(*e.args[0], f);
      if (e.name == "and") return left.truthy() ? eval(*e.args[1], f) : left;
      if (e.name == "or") return left.truthy() ? left : eval(*e.args[1], f);
      return charge(binary_operation(e.name, left, eval(*e.args[1], f), limits_.max_output_bytes));
    }
    case expr_kind::compare: {
      value left = eval(*e.args[0], f);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        value right = eval(*e.args[i + 1], f);
        if (!compare_values(e.ops[i], left, right)) return value(false);
        left = std::move(right);
      }
      return value(true);
    }
    case expr_kind::conditional: {
      if (eval(*e.args[1], f).truthy()) return eval(*e.args[0], f);
      if (e.args[2]) return eval(*e.args[2], f);
      return value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return value();
}

}  // namespace strata::chat
