#pragma once
// The escapes every JSON string needs: the quote, the backslash and the control characters.
// Writers differ in the rest (the API also escapes DEL and replaces ill-formed UTF-8; the
// template engine's tojson can escape all non-ASCII as Python's json.dumps does), so they call
// this per byte and decide the others themselves.

#include <string>

namespace strata {

/// Appends JSON's escape for byte `c` when it needs one and says whether it did; short forms
/// where JSON has them, \u00XX (lowercase, as Python writes it) for the other controls.
inline bool append_json_escape(std::string& out, unsigned char c) {
  static constexpr char hex[] = "0123456789abcdef";
  switch (c) {
    case '"': out += "\\\""; return true;
    case '\\': out += "\\\\"; return true;
    case '\b': out += "\\b"; return true;
    case '\f': out += "\\f"; return true;
    case '\n': out += "\\n"; return true;
    case '\r': out += "\\r"; return true;
    case '\t': out += "\\t"; return true;
    default:
      if (c >= 0x20) return false;
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
      return true;
  }
}

}  // namespace strata
