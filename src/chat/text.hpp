#pragma once
// UTF-8 string helpers with Python's str semantics (lengths and indices count code points).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::chat::text {

/// Python's str.isspace for one ASCII byte.
bool is_space(char c) noexcept;
/// The number of code points in `s`.
std::size_t length(std::string_view s) noexcept;
/// The code points of `s`, each as its own string.
std::vector<std::string> code_points(std::string_view s);
/// str.strip/lstrip/rstrip: removes whitespace, or the code points in `chars`, from the ends.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
/// str.split(sep, maxsplit); without `sep`, splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
/// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view from, std::string_view to, std::int64_t count);
/// ASCII upper/lower case (other code points are kept).
std::string upper(std::string_view s);
std::string lower(std::string_view s);
/// str.capitalize: first code point upper, the rest lower.
std::string capitalize(std::string_view s);
/// str.title: each run of letters starts upper case and continues lower case.
std::string title(std::string_view s);
/// Python's repr of a string: quoted, with backslash escapes.
std::string repr(std::string_view s);

}  // namespace strata::chat::text
