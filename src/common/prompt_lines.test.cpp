#include "src/common/prompt_lines.hpp"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(prompt_lines, a_backslash_n_becomes_a_newline) {
  EXPECT_EQ(unescape_newlines("Hello\\nWorld"), "Hello\nWorld");
  EXPECT_EQ(unescape_newlines("\\n\\n"), "\n\n");
  EXPECT_EQ(unescape_newlines("a\\n"), "a\n");
}

TEST(prompt_lines, every_other_byte_stays_as_it_is) {
  EXPECT_EQ(unescape_newlines(""), "");
  EXPECT_EQ(unescape_newlines("plain text"), "plain text");
  EXPECT_EQ(unescape_newlines("tab\\t and \\\\ stay"), "tab\\t and \\\\ stay");
  EXPECT_EQ(unescape_newlines("ends with a backslash\\"), "ends with a backslash\\");
  EXPECT_EQ(unescape_newlines("N\\N"), "N\\N");
}

TEST(prompt_lines, a_backslash_before_a_backslash_n_stays_and_the_pair_still_becomes_a_newline) {
  // The same rule both dumps have always used: pairs are read left to right, `\\` is no escape.
  EXPECT_EQ(unescape_newlines("a\\\\nb"), "a\\\nb");
}

}  // namespace
}  // namespace strata
