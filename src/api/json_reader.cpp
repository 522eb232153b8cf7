#include "src/api/json_reader.hpp"

#include <charconv>
#include <cmath>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

namespace strata::api::schema {
namespace {

api_error too_deep() {
  return malformed("objects and arrays nest deeper than " + std::to_string(max_json_depth) + " levels");
}

// For integers too large for int64, whose exact value is not worth printing.
api_error beyond_range(std::string_view param, std::int64_t lo, std::int64_t hi) {
  return invalid_request(std::string(param),
                         std::string(param) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

api_error wrong_type(std::string_view param, std::string_view what) {
  return invalid_request(std::string(param), std::string(param) + " must be " + std::string(what));
}

// Reads a number token whose type() said number; fails for tokens that are not valid numbers and
// for values that do not fit a double (1e400).
api_status number_of(od::value& value, std::string_view param, double& out) {
  if (auto ec = value.get_double().get(out)) {
    if (ec == simdjson::NUMBER_ERROR || ec == simdjson::NUMBER_OUT_OF_RANGE)
      return invalid_request(std::string(param), std::string(param) + " is not a representable number");
    return malformed(ec);
  }
  if (!std::isfinite(out)) return invalid_request(std::string(param), std::string(param) + " is not a representable number");
  return std::nullopt;
}

/// Calls fn(key, value) for each member of an object, in order; stops at the first error.
api_status visit_members(od::object& obj, const member_fn& fn) {
  for (auto member : obj) {
    od::field field;
    if (auto ec = std::move(member).get(field)) return malformed(ec);
    std::string_view key;
    if (auto ec = field.unescaped_key().get(key)) return malformed(ec);
    od::value v = field.value();
    if (auto st = fn(key, v)) return st;
  }
  return std::nullopt;
}

}  // namespace

api_error malformed(simdjson::error_code ec) { return malformed(simdjson::error_message(ec)); }

api_error malformed(std::string_view why) {
  return invalid_request({}, "could not parse the JSON body: " + std::string(why));
}

api_status for_each_root_member(std::string_view body, const member_fn& fn, const parse_limits& limits) {
  if (body.size() > limits.max_body_bytes) {
    api_error e = invalid_request({}, "the request body is larger than " + std::to_string(limits.max_body_bytes) + " bytes",
                                  "request_too_large");
    e.status = 413;
    return e;
  }
  // The parser and the padded copy live for this call only: no state is shared between requests.
  simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  if (auto ec = parser.iterate(padded).get(doc)) return malformed(ec);
  od::json_type t;
  if (auto ec = doc.type().get(t)) return malformed(ec);
  if (t != od::json_type::object) return invalid_request({}, "the request body must be a JSON object");
  od::object root;
  if (auto ec = doc.get_object().get(root)) return malformed(ec);
  if (auto st = visit_members(root, fn)) return st;
  // After the root object only whitespace may follow: a token left means trailing content.
  auto loc = doc.current_location();
  if (loc.error() == simdjson::SUCCESS) return malformed("unexpected content after the JSON object");
  if (loc.error() != simdjson::OUT_OF_BOUNDS) return malformed(loc.error());
  return std::nullopt;
}

api_status for_each_member(od::value& value, std::string_view param, int depth, const member_fn& fn) {
  if (depth > max_json_depth) return too_deep();
  od::json_type t;
  if (auto st = type_of(value, t)) return st;
  if (t != od::json_type::object) return wrong_type(param, "an object");
  od::object obj;
  if (auto ec = value.get_object().get(obj)) return malformed(ec);
  if (auto st = visit_members(obj, fn)) return st;
  return std::nullopt;
}

api_status for_each_element(od::value& value, std::string_view param, int depth, const element_fn& fn) {
  if (depth > max_json_depth) return too_deep();
  od::json_type t;
  if (auto st = type_of(value, t)) return st;
  if (t != od::json_type::array) return wrong_type(param, "an array");
  od::array arr;
  if (auto ec = value.get_array().get(arr)) return malformed(ec);
  std::size_t i = 0;
  for (auto element : arr) {
    od::value v;
    if (auto ec = std::move(element).get(v)) return malformed(ec);
    if (auto st = fn(i++, v)) return st;
  }
  return std::nullopt;
}

api_status type_of(od::value& value, od::json_type& out) {
  if (auto ec = value.type().get(out)) return malformed(ec);
  return std::nullopt;
}

bool take_null(od::value& value, api_status& st) {
  od::json_type t;
  if ((st = type_of(value, t))) return false;
  if (t != od::json_type::null) return false;
  bool is_null = false;
  // type() looks at the first byte only; is_null() checks the whole literal ("nul" is malformed).
  if (auto ec = value.is_null().get(is_null); ec || !is_null) st = malformed(ec ? ec : simdjson::N_ATOM_ERROR);
  return st ? false : true;
}

api_status read_bool(od::value& value, std::string_view param, std::optional<bool>& out) {
  api_status st;
  if (take_null(value, st) || st) return st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  if (t != od::json_type::boolean) return wrong_type(param, "a boolean");
  bool b = false;
  if (auto ec = value.get_bool().get(b)) return malformed(ec);
  out = b;
  return std::nullopt;
}

api_status read_string(od::value& value, std::string_view param, std::optional<std::string>& out) {
  api_status st;
  if (take_null(value, st) || st) return st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  if (t != od::json_type::string) return wrong_type(param, "a string");
  std::string_view s;
  if (auto ec = value.get_string().get(s)) return malformed(ec);
  out = std::string(s);
  return std::nullopt;
}

api_status read_number(od::value& value, std::string_view param, std::optional<double>& out) {
  api_status st;
  if (take_null(value, st) || st) return st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  if (t != od::json_type::number) return wrong_type(param, "a number");
  double x = 0;
  if ((st = number_of(value, param, x))) return st;
  out = x;
  return std::nullopt;
}

api_status read_integer(od::value& value, std::string_view param, std::int64_t lo, std::int64_t hi,
                        std::optional<std::int64_t>& out) {
  api_status st;
  if (take_null(value, st) || st) return st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  if (t != od::json_type::number) return wrong_type(param, "an integer");
  std::int64_t i = 0;
  auto ec = value.get_int64().get(i);
  if (ec == simdjson::NUMBER_OUT_OF_RANGE) {
    // A JSON integer beyond int64.
    return beyond_range(param, lo, hi);
  }
  if (ec) {
    // Not an int64 token: accept a number with an integral value (2.0, 1e3) that a double holds exactly.
    double d = 0;
    if ((st = number_of(value, param, d))) return st;
    if (std::floor(d) != d) return wrong_type(param, "an integer");
    if (std::fabs(d) > 9007199254740992.0) return beyond_range(param, lo, hi);
    i = static_cast<std::int64_t>(d);
  }
  if (i < lo || i > hi) return out_of_range(param, lo, hi, i);
  out = i;
  return std::nullopt;
}

api_status read_json(od::value& value, int depth, boost::json::value& out) {
  od::json_type t;
  if (auto st = type_of(value, t)) return st;
  switch (t) {
    case od::json_type::object: {
      if (depth > max_json_depth) return too_deep();
      boost::json::object& obj = out.emplace_object();
      return for_each_member(value, {}, depth, [&](std::string_view key, od::value& v) -> api_status {
        boost::json::value child;
        if (auto st = read_json(v, depth + 1, child)) return st;
        obj[key] = std::move(child);  // a repeated key keeps its last value
        return std::nullopt;
      });
    }
    case od::json_type::array: {
      if (depth > max_json_depth) return too_deep();
      boost::json::array& arr = out.emplace_array();
      return for_each_element(value, {}, depth, [&](std::size_t, od::value& v) -> api_status {
        boost::json::value child;
        if (auto st = read_json(v, depth + 1, child)) return st;
        arr.push_back(std::move(child));
        return std::nullopt;
      });
    }
    case od::json_type::string: {
      std::string_view s;
      if (auto ec = value.get_string().get(s)) return malformed(ec);
      out = boost::json::string(s);
      return std::nullopt;
    }
    case od::json_type::number: {
      std::int64_t i = 0;
      if (value.get_int64().get(i) == simdjson::SUCCESS) {
        out = i;
        return std::nullopt;
      }
      std::uint64_t u = 0;
      if (value.get_uint64().get(u) == simdjson::SUCCESS) {
        out = u;
        return std::nullopt;
      }
      double d = 0;
      if (auto ec = value.get_double().get(d)) return malformed(ec);
      out = d;
      return std::nullopt;
    }
    case od::json_type::boolean: {
      bool b = false;
      if (auto ec = value.get_bool().get(b)) return malformed(ec);
      out = b;
      return std::nullopt;
    }
    case od::json_type::null: {
      api_status st;
      take_null(value, st);
      out = nullptr;
      return st;
    }
  }
  return malformed("unknown JSON type");
}

api_status skip_value(od::value& value, int depth) {
  od::json_type t;
  if (auto st = type_of(value, t)) return st;
  switch (t) {
    case od::json_type::object:
      return for_each_member(value, {}, depth, [depth](std::string_view, od::value& v) { return skip_value(v, depth + 1); });
    case od::json_type::array:
      return for_each_element(value, {}, depth, [depth](std::size_t, od::value& v) { return skip_value(v, depth + 1); });
    case od::json_type::string: {
      std::string_view s;
      if (auto ec = value.get_string().get(s)) return malformed(ec);
      return std::nullopt;
    }
    case od::json_type::number: {
      // Any valid number token passes, however large: the value is not used.
      od::number n;
      if (value.get_number().get(n) == simdjson::SUCCESS) return std::nullopt;
      double d = 0;
      if (auto ec = value.get_double().get(d)) return malformed(ec);
      return std::nullopt;
    }
    case od::json_type::boolean: {
      bool b = false;
      if (auto ec = value.get_bool().get(b)) return malformed(ec);
      return std::nullopt;
    }
    case od::json_type::null: {
      api_status st;
      take_null(value, st);
      return st;
    }
  }
  return malformed("unknown JSON type");
}

api_error out_of_range(std::string_view param, double lo, double hi, bool lo_open, bool hi_open, double got) {
  std::string msg(param);
  msg += " must be in ";
  msg += lo_open ? "(" : "[";
  msg += format_number(lo) + ", " + format_number(hi);
  msg += hi_open ? ")" : "]";
  msg += ", got " + format_number(got);
  return invalid_request(std::string(param), std::move(msg));
}

api_error out_of_range(std::string_view param, std::int64_t lo, std::int64_t hi, std::int64_t got) {
  return invalid_request(std::string(param), std::string(param) + " must be in [" + std::to_string(lo) + ", " +
                                                 std::to_string(hi) + "], got " + std::to_string(got));
}

std::string format_number(double x) {
  if (!std::isfinite(x)) return x != x ? "nan" : (x < 0 ? "-inf" : "inf");
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace strata::api::schema
