#pragma once
// The names of jinja2's built-in tests, for the parser's check (the tests live in predicates.cpp).

#include <string_view>

namespace strata::chat {

/// Whether `value is name` names a known test.
bool is_known_test(std::string_view name);

}  // namespace strata::chat
