#include "src/tokenizer/utf8_streamer.hpp"

#include <gtest/gtest.h>

#include <random>

#include "src/common/utf8.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::tokenizer {
namespace {

TEST(utf8_streamer, holds_a_split_character_until_it_is_complete) {
  utf8_streamer s;
  EXPECT_EQ(s.push("a\xF0\x9F"), "a");
  EXPECT_EQ(s.pending(), 2u);
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.pending(), 0u);
}

TEST(utf8_streamer, releases_bytes_that_can_never_complete_a_character) {
  utf8_streamer s;
  EXPECT_EQ(s.push("\xFF"), "\xFF");      // never a lead byte
  EXPECT_EQ(s.push("\x80"), "\x80");      // a stray continuation byte
  EXPECT_EQ(s.push("\xE2"), "");          // may start a character ...
  EXPECT_EQ(s.push("x"), "\xE2x");        // ... but did not
  EXPECT_EQ(s.push("\xED\xA0"), "\xED\xA0");  // a surrogate is never valid
  EXPECT_EQ(s.push("\xC3"), "");
  EXPECT_EQ(s.flush(), "\xC3");           // the stream ended inside a character
  EXPECT_EQ(s.pending(), 0u);
}

TEST(utf8_streamer, never_emits_part_of_a_character_for_random_splits) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  for (int round = 0; round < 500; ++round) {
    std::string text;
    for (int i = 0, n = static_cast<int>(rng() % 30); i < n; ++i) {
      std::uint32_t cp = 0;
      do cp = rng() % 4 == 0 ? static_cast<std::uint32_t>(rng() % 0x110000) : static_cast<std::uint32_t>(rng() % 0x800);
      while (cp >= 0xD800 && cp <= 0xDFFF);
      utf8::append(text, cp);
    }
    utf8_streamer s;
    std::string joined;
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t n = std::min<std::size_t>(rng() % 5, text.size() - pos);
      std::string out = s.push(std::string_view(text).substr(pos, n));
      ASSERT_EQ(utf8::valid_prefix(out), out.size()) << "seed " << seed;
      joined += out;
      pos += n;
    }
    EXPECT_EQ(s.flush(), "") << "seed " << seed;
    EXPECT_EQ(joined, text) << "seed " << seed;
  }
}

}  // namespace
}  // namespace strata::tokenizer
