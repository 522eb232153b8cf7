#pragma once
// A small streaming JSON writer: compact output, keys in the order written, strings escaped so
// that the result is always valid JSON in valid UTF-8.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::api::schema {

/// Writes one JSON value into a string. Commas and colons are placed by the writer; the caller
/// only nests begin/end calls correctly.
class json_writer {
 public:
  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();
  /// The key of the next member of the current object.
  json_writer& key(std::string_view k);
  /// A string value. Quotes, backslashes and control characters are escaped (\n, \t ... or
  /// \u00XX); other characters pass through as UTF-8; bytes that are not valid UTF-8 become U+FFFD.
  json_writer& string(std::string_view s);
  json_writer& number(std::int64_t x);
  /// The shortest text that reads back as `x`; NaN and infinities are written as null.
  json_writer& number(double x);
  json_writer& boolean(bool b);
  json_writer& null();
  /// A value that is already serialized JSON, copied as is.
  json_writer& raw(std::string_view json);
  /// key(k) then string(s).
  json_writer& member(std::string_view k, std::string_view s) { return key(k).string(s); }

  /// The text written so far.
  const std::string& str() const { return out_; }
  /// Moves the text out; the writer is empty afterwards.
  std::string take();

 private:
  void before_value();

  std::string out_;
  // Per open container: whether a value has been written in it yet.
  std::vector<bool> has_value_;
  bool after_key_ = false;
};


/// Appends `s` to `out` as the body of a JSON string (no quotes), escaped as json_writer does.
void append_escaped(std::string& out, std::string_view s);

}  // namespace strata::api::schema
