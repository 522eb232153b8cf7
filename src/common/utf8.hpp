#pragma once
// utf8: the UTF-8 pieces the tokenizer, the text stream, the template engine and the JSON writer
// share: where the next character ends, whether it is still incomplete, what to replace when
// bytes are not UTF-8, and encoding a code point.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::utf8 {

/// U+FFFD REPLACEMENT CHARACTER, which stands in for bytes that are not UTF-8.
inline constexpr std::string_view replacement = "\xEF\xBF\xBD";

/// What the bytes at the start of a string hold.
enum class sequence_kind {
  /// A whole, well-formed character of `length` bytes.
  complete,
  /// The string ends inside a character: all `length` bytes left are a well-formed beginning.
  incomplete,
  /// `length` (>= 1) bytes that cannot begin a character: the maximal ill-formed part, which is
  /// replaced by one U+FFFD (the Unicode "maximal subpart" practice, as browsers decode).
  invalid,
};

/// The kind and byte length of the first sequence of a non-empty string.
struct sequence {
  sequence_kind kind;
  std::size_t length;
};

/// Classifies the first character of `s` (which must not be empty) by Unicode's table of
/// well-formed byte sequences: no overlong forms, no surrogates, nothing past U+10FFFF.
sequence next_sequence(std::string_view s) noexcept;

/// True when every byte of `s` belongs to a well-formed character.
bool is_valid(std::string_view s) noexcept;

/// Number of characters (code points) in well-formed UTF-8 text.
std::size_t count_code_points(std::string_view valid) noexcept;

/// `s` with each ill-formed part, and an incomplete character at the end, replaced by U+FFFD.
std::string sanitize(std::string_view s);

/// The length of the sequence at the start of `s` when it is one whole, well-formed character;
/// 0 otherwise (also for an empty or truncated one).
inline std::size_t valid_char(std::string_view s) noexcept {
  if (s.empty()) return 0;
  auto q = next_sequence(s);
  return q.kind == sequence_kind::complete ? q.length : 0;
}

/// The length of the longest prefix of `s` that is well-formed UTF-8.
std::size_t valid_prefix(std::string_view s) noexcept;

/// The length of the sequence that lead byte `c` announces (1 for a byte that cannot lead one).
inline std::size_t lead_length(unsigned char c) noexcept {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

/// Appends the UTF-8 encoding of code point `cp` (at most U+10FFFF).
void append(std::string& out, std::uint32_t cp);

}  // namespace strata::utf8
