#pragma once
// Python's operators on template values: arithmetic, comparison, membership.

#include <cstddef>
#include <string_view>

#include "src/chat/value.hpp"

namespace strata::chat {

/// `a op b` for op in + - * / // % ** ~. Results longer than `max_size` bytes or items (string
/// or list repetition, concatenation) are an error. Throws template_exception on type errors.
value binary_operation(std::string_view op, const value& a, const value& b, std::size_t max_size);

/// Unary minus or plus.
value unary_operation(std::string_view op, const value& a);

/// Python's ==, deep for lists and dicts (1 == 1.0 == True).
bool values_equal(const value& a, const value& b);

/// `a op b` for op in == != < <= > >= in notin.
bool compare_values(std::string_view op, const value& a, const value& b);

/// Python's `item in container` (substring, list element, dict key; false for undefined).
bool contains(const value& container, const value& item);

/// Python's ordering for sorting: numbers, strings and lists; throws on other mixes.
bool less_than(const value& a, const value& b);

/// Throws the error an undefined value gives when it is used; no-op for other values.
void require_defined(const value& v);

/// Python's printf-style `format % args`.
std::string percent_format(const std::string& format, const value& args);

}  // namespace strata::chat
