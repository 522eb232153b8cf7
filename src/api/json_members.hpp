#pragma once
// Small reads of Boost.JSON values shared by the parsers that validate a body as a JSON tree (the
// Messages and Responses APIs).

#include <cstddef>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

namespace strata::api::schema {

/// "param[i]", to name an element in an error.
inline std::string element_param(const std::string& param, std::size_t i) { return param + "[" + std::to_string(i) + "]"; }

/// The member `key` of `o` when it is a string, else null.
inline const boost::json::string* string_member(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v && v->is_string() ? &v->as_string() : nullptr;
}

}  // namespace strata::api::schema
