#pragma once
// The values a chat template computes with: a small dynamic type with Python's semantics.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace strata::chat {

class value;
class value_dict;

/// How deeply lists and dicts may nest: deeper values are refused when they are built, so that
/// printing, comparing and destroying them never recurse without bound.
inline constexpr int max_value_depth = 256;

/// A list; shared between values like a Python list (templates cannot mutate it).
using value_list = std::vector<value>;

/// The arguments of a call: positional ones, then keyword ones in the order written.
struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> named;
};

/// A callable (built-in function, bound method, macro). It throws template_exception on error.
using native_function = std::function<value(call_args&)>;

/// The kinds a value can have.
enum class value_kind : std::uint8_t {
  undefined,
  none,
  boolean,
  integer,
  floating,
  string,
  list,
  dict,
  function,
  name_space,
};

/// A dynamically typed template value: undefined, none, bool, int64, double, UTF-8 string,
/// list, insertion-ordered dict, callable, or namespace (a dict whose attributes can be set).
class value {
 public:
  /// An undefined value without a hint.
  value() : v_(undefined_t{}) {}
  value(bool b) : v_(b) {}                          // NOLINT: implicit by design
  value(int i) : v_(std::int64_t{i}) {}             // NOLINT
  value(std::int64_t i) : v_(i) {}                  // NOLINT
  value(double d) : v_(d) {}                        // NOLINT
  // Strings are shared (copying a value never copies its text), like Python's immutable str.
  value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}  // NOLINT
  value(std::string_view s) : value(std::string(s)) {}                              // NOLINT
  value(const char* s) : value(std::string(s)) {}                                   // NOLINT
  /// A list or dict; throws template_exception when it would nest deeper than max_value_depth.
  value(value_list l);                              // NOLINT
  value(value_dict d);                              // NOLINT

  /// None.
  static value none();
  /// An undefined value; `hint` is the message given when it is used in a way that fails.
  static value undefined(std::string hint);
  /// A callable named `name` (the name shows in messages).
  static value function(std::string name, native_function fn);
  /// A namespace holding `attrs`.
  static value make_namespace(value_dict attrs);
  /// A tuple: a list that prints as `(a, b)` (dict items, `a, b` literals, varargs).
  static value tuple(value_list items);

  value_kind kind() const noexcept { return static_cast<value_kind>(v_.index()); }
  bool is_undefined() const noexcept { return kind() == value_kind::undefined; }
  bool is_none() const noexcept { return kind() == value_kind::none; }
  bool is_bool() const noexcept { return kind() == value_kind::boolean; }
  bool is_int() const noexcept { return kind() == value_kind::integer; }
  bool is_float() const noexcept { return kind() == value_kind::floating; }
  /// Int, float or bool (Python counts bool as a number).
  bool is_number() const noexcept { return is_int() || is_float() || is_bool(); }
  bool is_string() const noexcept { return kind() == value_kind::string; }
  bool is_list() const noexcept { return kind() == value_kind::list; }
  /// A list made as a tuple (it behaves as a list except when printed).
  bool is_tuple() const noexcept { return is_list() && tuple_; }
  bool is_dict() const noexcept { return kind() == value_kind::dict; }
  bool is_function() const noexcept { return kind() == value_kind::function; }
  bool is_namespace() const noexcept { return kind() == value_kind::name_space; }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  /// The numeric value of an int, float or bool.
  double as_double() const;
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(v_); }
  const value_list& as_list() const { return *std::get<std::shared_ptr<value_list>>(v_); }
  /// The dict of a dict or the attributes of a namespace.
  const value_dict& as_dict() const;
  /// The attributes of a namespace, for assignment.
  value_dict& namespace_attrs() const;
  const native_function& as_function() const { return std::get<function_ptr>(v_).data->fn; }
  const std::string& function_name() const { return std::get<function_ptr>(v_).data->name; }
  /// The message used when this undefined value is used.
  const std::string& undefined_hint() const { return std::get<undefined_t>(v_).hint; }

  /// Python truthiness.
  bool truthy() const;
  /// Python's type name ("str", "int", "NoneType", ...).
  std::string_view type_name() const;
  /// Nesting depth of lists and dicts: 0 for scalars (and namespaces, which are flattened when a
  /// rendering ends), 1 + the deepest item for containers.
  int depth() const noexcept { return depth_; }
  /// Identity of shared containers (lists, dicts, namespaces, callables), for `sameas`.
  const void* identity() const;

 private:
  struct undefined_t {
    std::string hint;
  };
  struct function_data {
    std::string name;
    native_function fn;
  };
  struct namespace_data;
  struct function_ptr {
    std::shared_ptr<const function_data> data;
  };
  struct namespace_ptr {
    std::shared_ptr<namespace_data> attrs;
  };
  std::variant<undefined_t, std::nullptr_t, bool, std::int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<value_list>, std::shared_ptr<value_dict>, function_ptr, namespace_ptr>
      v_;
  std::uint16_t depth_ = 0;
  bool tuple_ = false;
};

/// A dict with string keys that keeps insertion order (like Python 3.7+ dicts).
class value_dict {
 public:
  using entry = std::pair<std::string, value>;

  /// The value at `key`, or nullptr.
  const value* find(std::string_view key) const;
  /// Sets `key`, keeping its position when it exists.
  void set(std::string key, value v);
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  auto begin() const noexcept { return entries_.begin(); }
  auto end() const noexcept { return entries_.end(); }

 private:
  std::vector<entry> entries_;
};

}  // namespace strata::chat
