#pragma once
// The bounds that request parsing applies to a body.

#include <cstddef>

namespace strata::api::schema {

/// Objects and arrays nested deeper than this (the root object is depth 1) are refused.
inline constexpr int max_json_depth = 128;

/// The bounds every request parser applies before reading a body.
struct parse_limits {
  /// Bodies above this are refused with 413 before parsing.
  std::size_t max_body_bytes = std::size_t{32} << 20;
};

/// The limits used when a parser is given none.
inline constexpr parse_limits default_limits{};

}  // namespace strata::api::schema
