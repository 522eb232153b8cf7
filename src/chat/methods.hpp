#pragma once
// Methods of strings, dicts and lists that templates call (`s.strip()`, `d.items()`).

#include <string>

#include "src/chat/value.hpp"

namespace strata::chat {

/// `obj.name` as a method bound to `obj`, or undefined when `obj` has no such method.
/// Methods that would mutate a list or dict fail when called (the sandbox is immutable).
value bound_method(const value& obj, const std::string& name);

/// Python's str.format with `{}`, `{0}` and `{name}` fields (no format specs).
std::string python_format(const std::string& format, const call_args& args);

}  // namespace strata::chat
