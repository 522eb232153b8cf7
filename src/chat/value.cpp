#include "src/chat/value.hpp"

#include <algorithm>
#include <string>

#include "src/chat/template_exception.hpp"

namespace strata::chat {

struct value::namespace_data {
  value_dict items;
};

namespace {

int checked_depth(int deepest_item) {
  if (deepest_item + 1 > max_value_depth) {
    throw_template_error("value nesting is too deep (over ", std::to_string(max_value_depth), " levels)");
  }
  return deepest_item + 1;
}

}  // namespace

value::value(value_list l) {
  int deepest = 0;
  for (const auto& item : l) deepest = std::max(deepest, item.depth());
  depth_ = static_cast<std::uint16_t>(checked_depth(deepest));
  v_ = std::make_shared<value_list>(std::move(l));
}

value::value(value_dict d) {
  int deepest = 0;
  for (const auto& [k, item] : d) deepest = std::max(deepest, item.depth());
  depth_ = static_cast<std::uint16_t>(checked_depth(deepest));
  v_ = std::make_shared<value_dict>(std::move(d));
}

value value::none() {
  value v;
  v.v_ = nullptr;
  return v;
}

value value::undefined(std::string hint) {
  value v;
  v.v_ = undefined_t{std::move(hint)};
  return v;
}

value value::function(std::string name, native_function fn) {
  value v;
  v.v_ = function_ptr{std::make_shared<const function_data>(function_data{std::move(name), std::move(fn)})};
  return v;
}

value value::make_namespace(value_dict attrs) {
  value v;
  auto data = std::make_shared<namespace_data>();
  data->items = std::move(attrs);
  v.v_ = namespace_ptr{std::move(data)};
  return v;
}

value value::tuple(value_list items) {
  value v(std::move(items));
  v.tuple_ = true;
  return v;
}

double value::as_double() const {
  switch (kind()) {
    case value_kind::integer: return static_cast<double>(as_int());
    case value_kind::floating: return std::get<double>(v_);
    case value_kind::boolean: return as_bool() ? 1.0 : 0.0;
    default: return 0.0;
  }
}

const value_dict& value::as_dict() const {
  if (is_namespace()) return std::get<namespace_ptr>(v_).attrs->items;
  return *std::get<std::shared_ptr<value_dict>>(v_);
}

value_dict& value::namespace_attrs() const { return std::get<namespace_ptr>(v_).attrs->items; }

bool value::truthy() const {
  switch (kind()) {
    case value_kind::undefined:
    case value_kind::none: return false;
    case value_kind::boolean: return as_bool();
    case value_kind::integer: return as_int() != 0;
    case value_kind::floating: return std::get<double>(v_) != 0.0;
    case value_kind::string: return !as_string().empty();
    case value_kind::list: return !as_list().empty();
    case value_kind::dict: return !as_dict().empty();
    case value_kind::function:
    case value_kind::name_space: return true;
  }
  return false;
}

std::string_view value::type_name() const {
  switch (kind()) {
    case value_kind::undefined: return "Undefined";
    case value_kind::none: return "NoneType";
    case value_kind::boolean: return "bool";
    case value_kind::integer: return "int";
    case value_kind::floating: return "float";
    case value_kind::string: return "str";
    case value_kind::list: return "list";
    case value_kind::dict: return "dict";
    case value_kind::function: return "function";
    case value_kind::name_space: return "Namespace";
  }
  return "object";
}

const void* value::identity() const {
  switch (kind()) {
    case value_kind::list: return std::get<std::shared_ptr<value_list>>(v_).get();
    case value_kind::dict: return std::get<std::shared_ptr<value_dict>>(v_).get();
    case value_kind::function: return std::get<function_ptr>(v_).data.get();
    case value_kind::name_space: return std::get<namespace_ptr>(v_).attrs.get();
    default: return nullptr;
  }
}

const value* value_dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void value_dict::set(std::string key, value v) {
  for (auto& [k, old] : entries_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(v));
}

}  // namespace strata::chat
