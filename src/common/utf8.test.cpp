#include "src/common/utf8.hpp"

#include <gtest/gtest.h>

#include <random>

#include "tests/support/test_seed.hpp"

namespace strata::utf8 {
namespace {

/// An independent validity check: decode each sequence by its lead byte, then reject overlong
/// forms, surrogates and code points past U+10FFFF.
bool reference_valid(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    std::uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    const std::uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

TEST(utf8, validity_agrees_with_a_decoding_reference_on_random_bytes) {
  std::mt19937 rng(test_seed());
  // Bytes drawn mostly from the interesting ranges so that valid strings are not rare.
  const unsigned char pool[] = {0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF,
                                0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  int valid = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    for (std::size_t n = rng() % 6; n > 0; --n) s.push_back(static_cast<char>(pool[rng() % sizeof pool]));
    const bool want = reference_valid(s);
    valid += want;
    ASSERT_EQ(utf8::is_valid(s), want) << testing::PrintToString(s);
    const std::string clean = utf8::sanitize(s);
    ASSERT_TRUE(reference_valid(clean));
    if (want) {
      ASSERT_EQ(clean, s);
    }
  }
  EXPECT_GT(valid, 1000);
}

TEST(utf8, classifies_complete_incomplete_and_ill_formed_starts) {
  using k = utf8::sequence_kind;
  auto is = [](std::string_view s, k kind, std::size_t len) {
    auto q = utf8::next_sequence(s);
    return q.kind == kind && q.length == len;
  };
  EXPECT_TRUE(is("a", k::complete, 1));
  EXPECT_TRUE(is("\xC3\xA9x", k::complete, 2));
  EXPECT_TRUE(is("\xE6\x97\xA5", k::complete, 3));
  EXPECT_TRUE(is("\xF0\x9F\x9A\x80", k::complete, 4));
  EXPECT_TRUE(is("\xF0\x9F\x9A", k::incomplete, 3));
  EXPECT_TRUE(is("\xE6", k::incomplete, 1));
  EXPECT_TRUE(is("\x80", k::invalid, 1));          // stray continuation
  EXPECT_TRUE(is("\xC0\xAF", k::invalid, 1));      // overlong lead
  EXPECT_TRUE(is("\xED\xA0\x80", k::invalid, 1));  // surrogate
  EXPECT_TRUE(is("\xF0\x9F\x41", k::invalid, 2));  // cut short by an ASCII byte: one maximal part
  EXPECT_TRUE(is("\xF4\x90\x80\x80", k::invalid, 1));  // past U+10FFFF
}

TEST(utf8, sanitize_replaces_each_maximal_ill_formed_part_once) {
  EXPECT_EQ(utf8::sanitize("a\xF0\x9F\x41" "b"), "a\xEF\xBF\xBD" "Ab");
  EXPECT_EQ(utf8::sanitize("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::sanitize("end\xE6\x97"), "end\xEF\xBF\xBD");
  EXPECT_EQ(utf8::count_code_points("a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x9A\x80"), 4u);
}

}  // namespace
}  // namespace strata::utf8

namespace strata::utf8 {
namespace {

TEST(Utf8, EncodesEveryCodePointAndFindsTheValidPrefix) {
  std::mt19937 rng(test_seed());
  for (int trial = 0; trial < 2000; ++trial) {
    std::uint32_t cp = rng() % 0x110000;
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    append(s, cp);
    // Decoded by hand, independently of next_sequence.
    std::uint32_t back = 0;
    auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    if (s.size() == 1) back = b(0);
    else if (s.size() == 2) back = (b(0) & 0x1Fu) << 6 | (b(1) & 0x3Fu);
    else if (s.size() == 3) back = (b(0) & 0x0Fu) << 12 | (b(1) & 0x3Fu) << 6 | (b(2) & 0x3Fu);
    else back = (b(0) & 0x07u) << 18 | (b(1) & 0x3Fu) << 12 | (b(2) & 0x3Fu) << 6 | (b(3) & 0x3Fu);
    ASSERT_EQ(back, cp);
    ASSERT_EQ(s.size(), cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u);
    ASSERT_EQ(lead_length(b(0)), s.size());
    ASSERT_EQ(valid_char(s), s.size());
    ASSERT_EQ(valid_prefix(s + "\xFF" + s), s.size());
    ASSERT_EQ(valid_prefix(s + s.substr(0, s.size() - 1)), s.size() == 1 ? 2 * s.size() - 1 : s.size());
  }
  EXPECT_EQ(valid_char(""), 0u);
  EXPECT_EQ(valid_char("\xC0\x80"), 0u);  // overlong
}

}  // namespace
}  // namespace strata::utf8
