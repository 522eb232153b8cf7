#pragma once
// Small reads of Boost.JSON values shared by the parsers that validate a body as a JSON tree (the
// Messages and Responses APIs).

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"

namespace strata::api::schema {

/// "param[i]", to name an element in an error.
inline std::string element_param(const std::string& param, std::size_t i) { return param + "[" + std::to_string(i) + "]"; }

/// The member `key` of `o` when it is a string, else null.
inline const boost::json::string* string_member(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return v && v->is_string() ? &v->as_string() : nullptr;
}

/// Calls fn(object, param) for each element of `v`, which must be an array (named `param`) of
/// objects (each named "param[i]"); stops at the first error fn returns.
template <class F>
api_status for_each_object(const boost::json::value& v, const std::string& param, F&& fn) {
  if (!v.is_array()) return invalid_request(param, param + " must be an array");
  std::size_t i = 0;
  for (const boost::json::value& e : v.as_array()) {
    const std::string p = element_param(param, i++);
    if (!e.is_object()) return invalid_request(p, p + " must be an object");
    if (auto err = fn(e.as_object(), p)) return err;
  }
  return std::nullopt;
}

/// The text of `v`: a string, or an array of `{"type": T, "text": ...}` parts whose T is one of
/// `types`, joined with "\n". Anything else is a 400 naming the part at fault.
inline api_status read_text_parts(const boost::json::value& v, const std::string& param, std::initializer_list<std::string_view> types,
                                  std::string& out) {
  if (v.is_string()) {
    out = v.as_string();
    return std::nullopt;
  }
  if (!v.is_array()) return invalid_request(param, param + " must be a string or an array of text parts");
  std::size_t i = 0;
  for (const boost::json::value& part : v.as_array()) {
    const std::string p = element_param(param, i++);
    const boost::json::string* type = part.is_object() ? string_member(part.as_object(), "type") : nullptr;
    if (!type) return invalid_request(p, p + " must be an object with a type");
    bool known = false;
    for (std::string_view t : types) known = known || *type == t;
    if (!known) return invalid_request(p + ".type", p + ".type \"" + std::string(*type) + "\" is not supported; only text parts are");
    const boost::json::string* text = string_member(part.as_object(), "text");
    if (!text) return invalid_request(p + ".text", p + ".text must be a string");
    if (!out.empty()) out += '\n';
    out += *text;
  }
  return std::nullopt;
}

}  // namespace strata::api::schema
