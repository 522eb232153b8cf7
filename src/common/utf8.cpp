#include "src/common/utf8.hpp"

namespace strata::utf8 {

sequence next_sequence(std::string_view s) noexcept {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return {sequence_kind::complete, 1};
  std::size_t need = 0;
  // The allowed range of the second byte; later bytes are always 80..BF.
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // below: overlong
    if (b0 == 0xED) hi = 0x9F;  // above: UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // below: overlong
    if (b0 == 0xF4) hi = 0x8F;  // above: past U+10FFFF
  } else {
    return {sequence_kind::invalid, 1};  // a stray continuation byte, C0/C1, or F5..FF
  }
  for (std::size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {sequence_kind::incomplete, s.size()};
    const auto b = static_cast<unsigned char>(s[i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {sequence_kind::invalid, i};
  }
  return {sequence_kind::complete, need};
}

bool is_valid(std::string_view s) noexcept {
  while (!s.empty()) {
    auto q = next_sequence(s);
    if (q.kind != sequence_kind::complete) return false;
    s.remove_prefix(q.length);
  }
  return true;
}

std::size_t count_code_points(std::string_view valid) noexcept {
  std::size_t n = 0;
  for (char c : valid) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    auto q = next_sequence(s);
    if (q.kind == sequence_kind::complete) out.append(s.substr(0, q.length));
    else out.append(replacement);
    s.remove_prefix(q.length);
  }
  return out;
}

std::size_t valid_prefix(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    auto q = next_sequence(s.substr(i));
    if (q.kind != sequence_kind::complete) break;
    i += q.length;
  }
  return i;
}

void append(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace strata::utf8
