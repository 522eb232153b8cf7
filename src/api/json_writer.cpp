#include "src/api/json_writer.hpp"

#include <charconv>
#include <cmath>

#include "src/common/json_escape.hpp"
#include "src/common/utf8.hpp"

namespace strata::api::schema {
void append_escaped(std::string& out, std::string_view s) {
  while (!s.empty()) {
    auto c = static_cast<unsigned char>(s[0]);
    if (c >= 0x80) {
      std::size_t n = utf8::valid_char(s);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER for each stray byte
        s.remove_prefix(1);
      } else {
        out.append(s.data(), n);
        s.remove_prefix(n);
      }
      continue;
    }
    if (c == 0x7F) out += "\\u007f";
    else if (!append_json_escape(out, c)) out += static_cast<char>(c);
    s.remove_prefix(1);
  }
}

void json_writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_value_.empty()) {
    if (has_value_.back()) out_ += ',';
    has_value_.back() = true;
  }
}

json_writer& json_writer::begin_object() {
  before_value();
  out_ += '{';
  has_value_.push_back(false);
  return *this;
}

json_writer& json_writer::end_object() {
  out_ += '}';
  has_value_.pop_back();
  return *this;
}

json_writer& json_writer::begin_array() {
  before_value();
  out_ += '[';
  has_value_.push_back(false);
  return *this;
}

json_writer& json_writer::end_array() {
  out_ += ']';
  has_value_.pop_back();
  return *this;
}

json_writer& json_writer::key(std::string_view k) {
  before_value();
  out_ += '"';
  append_escaped(out_, k);
  out_ += "\":";
  after_key_ = true;
  return *this;
}

json_writer& json_writer::string(std::string_view s) {
  before_value();
  out_ += '"';
  append_escaped(out_, s);
  out_ += '"';
  return *this;
}

json_writer& json_writer::number(std::int64_t x) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  out_.append(buf, r.ptr);
  return *this;
}

json_writer& json_writer::number(double x) {
  if (!std::isfinite(x)) return null();
  before_value();
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  out_.append(buf, r.ptr);
  return *this;
}

json_writer& json_writer::boolean(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

json_writer& json_writer::null() {
  before_value();
  out_ += "null";
  return *this;
}

json_writer& json_writer::raw(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

std::string json_writer::take() {
  has_value_.clear();
  after_key_ = false;
  std::string s = std::move(out_);
  out_.clear();
  return s;
}

}  // namespace strata::api::schema
