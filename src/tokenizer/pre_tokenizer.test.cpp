#include "src/tokenizer/pre_tokenizer.hpp"

#include <gtest/gtest.h>

#include <random>

#include "tests/support/test_seed.hpp"

namespace strata::tokenizer {
namespace {

std::vector<std::string> split(std::string_view name, std::string_view text) {
  auto p = pre_tokenizer::create(name);
  EXPECT_TRUE(p) << p.err().message;
  std::vector<std::string_view> pieces;
  (*p)->split(text, pieces);
  return {pieces.begin(), pieces.end()};
}

using pieces = std::vector<std::string>;

TEST(pre_tokenizer, gpt2_splits_words_with_their_leading_space_and_keeps_the_last_space_of_a_run) {
  EXPECT_EQ(split("gpt-2", "Hello world's  12 fine!!"), (pieces{"Hello", " world", "'s", " ", " 12", " fine", "!!"}));
  EXPECT_EQ(split("gpt-2", "a\n\nb"), (pieces{"a", "\n", "\n", "b"}));
}

TEST(pre_tokenizer, llama3_groups_digits_by_three_and_matches_contractions_in_any_case) {
  EXPECT_EQ(split("llama-bpe", "1234567 WE'LL"), (pieces{"123", "456", "7", " WE", "'LL"}));
  EXPECT_EQ(split("qwen2", "123"), (pieces{"1", "2", "3"}));
  // U+017F (long s) is not a case variant of 's' here.
  EXPECT_EQ(split("llama-bpe", "'\xC5\xBF"), (pieces{"'\xC5\xBF"}));
}

TEST(pre_tokenizer, several_regexes_apply_in_sequence) {
  // starcoder: digits one by one first, then the GPT-2 regex within the rest.
  EXPECT_EQ(split("starcoder", "ab12 cd"), (pieces{"ab", "1", "2", " cd"}));
  // falcon: punctuation runs first, then GPT-2, then digit triples.
  EXPECT_EQ(split("falcon", "x=1234"), (pieces{"x", "=", "123", "4"}));
}

TEST(pre_tokenizer, invalid_utf8_bytes_become_pieces_of_their_own) {
  EXPECT_EQ(split("gpt-2", "ab\xFF" "cd"), (pieces{"ab", "\xFF", "cd"}));
}

TEST(pre_tokenizer, pieces_always_concatenate_to_the_text) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  for (const char* name : {"default", "gpt-2", "llama-bpe", "qwen2", "starcoder", "falcon", "deepseek-llm", "deepseek-coder",
                           "deepseek-v3", "tekken", "gpt-4o", "poro-chat", "viking", "seed-coder", "chatglm-bpe"}) {
    auto p = pre_tokenizer::create(name);
    ASSERT_TRUE(p) << name << ": " << p.err().message;
    for (int round = 0; round < 50; ++round) {
      std::string s(rng() % 64, '\0');
      for (char& c : s) c = static_cast<char>(rng() % 4 ? 32 + rng() % 95 : rng() % 256);
      std::vector<std::string_view> out;
      (*p)->split(s, out);
      std::string joined;
      for (auto v : out) {
        EXPECT_FALSE(v.empty()) << name;
        joined += v;
      }
      EXPECT_EQ(joined, s) << name << ", seed " << seed;
    }
  }
}

TEST(pre_tokenizer, an_unknown_name_is_not_found) {
  auto p = pre_tokenizer::create("no-such-pre-tokenizer");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.err().code, errc::not_found);
}

}  // namespace
}  // namespace strata::tokenizer
