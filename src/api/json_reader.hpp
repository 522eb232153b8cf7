#pragma once
// Typed reads from simdjson's On-Demand API with OpenAI-shaped errors. Used only by the request
// parsers' .cpp files; nothing here throws.
//
// simdjson's On-Demand front end (3.0) keeps no depth limit of its own: it walks any nesting
// iteratively, but everything here that descends (read_json, skip_value, for_each_*) recurses,
// so each such call carries a depth and fails past max_json_depth instead of growing the stack.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/value.hpp>
#include <simdjson.h>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"

namespace strata::api::schema {

namespace od = simdjson::ondemand;

/// "could not parse the JSON body: <simdjson's reason>".
api_error malformed(simdjson::error_code ec);
/// "could not parse the JSON body: <why>".
api_error malformed(std::string_view why);

/// Called for each member of an object: its unescaped key and its value.
using member_fn = std::function<api_status(std::string_view key, od::value& value)>;
/// Called for each element of an array with its index.
using element_fn = std::function<api_status(std::size_t index, od::value& value)>;

/// Parses `body` as one JSON object and calls `fn` for each member in order (a key given twice
/// is seen twice, so the last one wins). Refuses a body that is too large, not an object, malformed
/// anywhere (also inside members that `fn` does not read) or followed by anything but whitespace.
api_status for_each_root_member(std::string_view body, const member_fn& fn, const parse_limits& limits = default_limits);

/// Calls `fn` for each member of `value`, which must be an object ("<param> must be an object").
/// `depth` is the depth of `value`.
api_status for_each_member(od::value& value, std::string_view param, int depth, const member_fn& fn);
/// Calls `fn` for each element of `value`, which must be an array ("<param> must be an array").
api_status for_each_element(od::value& value, std::string_view param, int depth, const element_fn& fn);

/// True (and the value consumed) when `value` is JSON null; a malformed literal sets `st`.
bool take_null(od::value& value, api_status& st);

/// The JSON type of `value`, or an error when the token is not a JSON value.
api_status type_of(od::value& value, od::json_type& out);

/// Reads a boolean; null leaves `out` empty. Any other type: "<param> must be a boolean".
api_status read_bool(od::value& value, std::string_view param, std::optional<bool>& out);
/// Reads a string; null leaves `out` empty. Any other type: "<param> must be a string".
api_status read_string(od::value& value, std::string_view param, std::optional<std::string>& out);
/// Reads a finite number; null leaves `out` empty. Any other type: "<param> must be a number".
api_status read_number(od::value& value, std::string_view param, std::optional<double>& out);
/// Reads an integer (a JSON integer, or a number with an integral value below 2^53); null leaves
/// `out` empty. Integers beyond int64 are reported as out of [lo, hi].
api_status read_integer(od::value& value, std::string_view param, std::int64_t lo, std::int64_t hi,
                        std::optional<std::int64_t>& out);

/// Copies `value` (at `depth`) into a Boost.JSON value; a key given twice keeps its last value.
api_status read_json(od::value& value, int depth, boost::json::value& out);
/// Walks `value` (at `depth`) and checks that every token in it is well-formed, keeping nothing.
api_status skip_value(od::value& value, int depth);

/// "<param> must be in [lo, hi], got x" with open or closed ends.
api_error out_of_range(std::string_view param, double lo, double hi, bool lo_open, bool hi_open, double got);
/// The same for integers.
api_error out_of_range(std::string_view param, std::int64_t lo, std::int64_t hi, std::int64_t got);

/// The shortest decimal text that reads back as `x` ("0.5", "2", "1e-05").
std::string format_number(double x);

}  // namespace strata::api::schema
