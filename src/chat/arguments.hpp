#pragma once
// Binds the arguments of a call to parameter names, like a Python signature.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/chat/value.hpp"

namespace strata::chat {

/// The arguments of one call of a filter, test, method or built-in, bound by position or name.
class arguments {
 public:
  /// Throws template_exception for surplus positional or unknown keyword arguments.
  arguments(const call_args& args, std::string_view function, std::vector<std::string_view> params);

  bool has(std::size_t i) const { return i < bound_.size() && bound_[i].has_value(); }
  /// The argument, or undefined when it was not given.
  value get(std::size_t i) const { return has(i) ? *bound_[i] : value(); }
  value get_or(std::size_t i, value fallback) const { return has(i) ? *bound_[i] : std::move(fallback); }
  /// An integer argument (bools count); throws when it has another type.
  std::int64_t get_int(std::size_t i, std::int64_t fallback) const;
  bool get_bool(std::size_t i, bool fallback) const { return has(i) ? bound_[i]->truthy() : fallback; }
  /// A string argument, or nullopt when absent or none; throws when it has another type.
  std::optional<std::string> get_string(std::size_t i) const;

 private:
  std::string function_;
  std::vector<std::string_view> names_;
  std::vector<std::optional<value>> bound_;
};

}  // namespace strata::chat
