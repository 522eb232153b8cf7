#pragma once
// Converting values to text the way Python does (str, repr, json.dumps) and from Boost.JSON.

#include <optional>
#include <string>

#include <boost/json/value.hpp>

#include "src/chat/value.hpp"

namespace strata::chat {

/// Python's repr of a float ("1.0", "1e+16", "1.5e-05", "nan", "-inf").
std::string format_double(double d);
/// Python's str(v); undefined prints as "" (jinja2's default Undefined).
std::string to_str(const value& v);
/// Python's repr(v) (strings quoted), as used inside printed lists and dicts.
std::string to_repr(const value& v);

/// Options of json.dumps as the `tojson` filter passes them.
struct json_options {
  /// Pretty-print with this indent string; none gives one line.
  std::optional<std::string> indent;
  /// Separators between items and between a key and its value; defaults as json.dumps.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
  /// Escape every non-ASCII code point as \uXXXX.
  bool ensure_ascii = false;
};

/// json.dumps(v, ensure_ascii=False, ...): keys keep their order, no HTML escaping.
/// Throws template_exception for values JSON cannot hold (undefined, callables, namespaces).
std::string to_json(const value& v, const json_options& options = {});

/// A value from JSON; an unsigned integer beyond int64 becomes a float.
/// Throws template_exception when nesting is deeper than the evaluator accepts.
value from_json(const boost::json::value& j);

}  // namespace strata::chat
