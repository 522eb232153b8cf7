#include "src/sampling/text_stream.hpp"

#include <gtest/gtest.h>

#include <random>

#include "src/common/utf8.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::sampling {
namespace {

/// Everything a stream releases for these pieces, finish() included, and whether it stopped.
struct run_result {
  std::string text;
  std::vector<std::string> chunks;
  bool stopped = false;
  int matched = -1;
};

run_result run(text_stream& t, const std::vector<std::string>& pieces) {
  run_result r;
  for (const auto& p : pieces) {
    auto o = t.feed(p);
    r.chunks.push_back(o.text);
    r.text += o.text;
    if (o.stopped) {
      r.stopped = true;
      break;
    }
  }
  if (!r.stopped) {
    r.chunks.push_back(t.finish());
    r.text += r.chunks.back();
  }
  r.matched = t.matched_stop();
  return r;
}

TEST(text_stream, a_stop_string_split_over_several_pieces_is_never_emitted) {
  text_stream t({"xyz", "STOP"});
  auto r = run(t, {"hello S", "T", "O", "P world", "more"});
  EXPECT_EQ(r.text, "hello ");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.matched, 1);
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"hello ", "", "", ""}));
}

TEST(text_stream, a_partial_match_that_fails_is_released_at_once) {
  text_stream t({"STOP"});
  EXPECT_EQ(t.feed("a ST").text, "a ");
  auto o = t.feed("ay");
  EXPECT_EQ(o.text, "STay");
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(t.feed("STO").text, "");
  EXPECT_EQ(t.finish(), "STO");  // at the end a stop prefix is plain text
}

TEST(text_stream, a_character_split_across_pieces_is_held_until_whole) {
  text_stream t;
  EXPECT_EQ(t.feed("caf\xC3").text, "caf");
  EXPECT_EQ(t.feed("\xA9 \xF0\x9F").text, "\xC3\xA9 ");
  EXPECT_EQ(t.feed("\x9A").text, "");
  EXPECT_EQ(t.feed("\x80!").text, "\xF0\x9F\x9A\x80!");
  EXPECT_EQ(t.emitted_bytes(), 11u);
  EXPECT_EQ(t.emitted_chars(), 7u);
}

TEST(text_stream, a_multibyte_stop_string_matches_across_split_characters) {
  text_stream t({"\xC3\xA9!"});  // "é!"
  auto r = run(t, {"ab\xC3", "\xA9", "!", "x"});
  EXPECT_EQ(r.text, "ab");
  EXPECT_TRUE(r.stopped);
}

TEST(text_stream, a_stop_string_that_starts_like_another_waits_for_the_full_match) {
  text_stream t({"<end>", "<eot>"});
  EXPECT_EQ(t.feed("hi <e").text, "hi ");
  EXPECT_EQ(t.feed("o").text, "");
  auto o = t.feed("t> bye");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "");
  EXPECT_EQ(t.matched_stop(), 1);
}

TEST(text_stream, a_self_overlapping_stop_string_is_found_after_a_false_start) {
  text_stream t({"aab"});
  auto r = run(t, {"xa", "a", "a", "b"});
  EXPECT_EQ(r.text, "xa");
  EXPECT_TRUE(r.stopped);
}

TEST(text_stream, the_stop_completed_first_wins_whatever_the_pieces) {
  // "bc" is complete before "abcd" can be, so "bc" stops the stream even in one piece.
  for (auto pieces : {std::vector<std::string>{"xabcd"}, std::vector<std::string>{"xa", "b", "cd"}}) {
    text_stream t({"abcd", "bc"});
    auto r = run(t, pieces);
    EXPECT_EQ(r.text, "xa");
    EXPECT_EQ(r.matched, 1);
  }
  // When two end on the same byte, the longer cuts earlier.
  text_stream t({"cd", "bcd"});
  EXPECT_EQ(run(t, {"abcd"}).text, "a");
  EXPECT_EQ(t.matched_stop(), 1);
}

TEST(text_stream, nothing_is_taken_after_a_stop) {
  text_stream t({"."});
  EXPECT_TRUE(t.feed("one. two").stopped);
  auto o = t.feed("three");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "");
  EXPECT_EQ(t.finish(), "");
  EXPECT_EQ(t.emitted_bytes(), 3u);
}

TEST(text_stream, an_incomplete_character_at_the_end_becomes_a_replacement_character) {
  text_stream t;
  EXPECT_EQ(t.feed("ok\xE6\x97").text, "ok");
  EXPECT_EQ(t.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(t.emitted_chars(), 3u);
  EXPECT_EQ(t.feed("late").text, "");  // finished
}

TEST(text_stream, bytes_that_are_not_utf8_become_replacement_characters) {
  text_stream t;
  EXPECT_EQ(t.feed("a\xFF" "b\x80").text, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
}

TEST(text_stream, validate_stop_names_the_parameter) {
  EXPECT_TRUE(text_stream::validate_stop({"a", "b", "c", "d"}));
  auto many = text_stream::validate_stop({"a", "b", "c", "d", "e"});
  ASSERT_FALSE(many);
  EXPECT_NE(many.err().message.find("stop"), std::string::npos);
  EXPECT_FALSE(text_stream::validate_stop({"a", ""}));
}

/// The reference: the text cut before the stop string completed first (the longest one when
/// several end on the same byte), computed by brute force over every end position.
std::pair<std::string, int> cut_at_first_stop(const std::string& text, const std::vector<std::string>& stops) {
  for (std::size_t end = 1; end <= text.size(); ++end) {
    int best = -1;
    for (std::size_t k = 0; k < stops.size(); ++k) {
      const auto& s = stops[k];
      if (s.empty() || s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best < 0 || s.size() > stops[static_cast<std::size_t>(best)].size()) best = static_cast<int>(k);
    }
    if (best >= 0) return {text.substr(0, end - stops[static_cast<std::size_t>(best)].size()), best};
  }
  return {text, -1};
}

TEST(text_stream, random_text_cut_anywhere_comes_out_whole_up_to_the_first_stop) {
  std::mt19937 rng(test_seed());
  const std::string alphabet[] = {"a", "b", " ", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x9A\x80"};
  auto random_text = [&](std::size_t chars) {
    std::string s;
    for (std::size_t i = 0; i < chars; ++i) s += alphabet[rng() % std::size(alphabet)];
    return s;
  };
  int stopped = 0;
  for (int round = 0; round < 3000; ++round) {
    const std::string text = random_text(1 + rng() % 60);
    std::vector<std::string> stops;
    for (std::size_t n = rng() % 5; n > 0; --n) stops.push_back(random_text(1 + rng() % 4));
    std::vector<std::string> pieces;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t n = std::min<std::size_t>(text.size() - i, rng() % 6);  // empty pieces too, and cuts inside characters
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    text_stream t(stops);
    auto r = run(t, pieces);
    const auto [want, which] = cut_at_first_stop(text, stops);
    ASSERT_EQ(r.text, want) << "round " << round;
    ASSERT_EQ(r.stopped, which >= 0);
    ASSERT_EQ(r.matched, which);
    for (const auto& c : r.chunks) ASSERT_TRUE(utf8::is_valid(c)) << "a chunk split a character";
    ASSERT_EQ(t.emitted_bytes(), want.size());
    ASSERT_EQ(t.emitted_chars(), utf8::count_code_points(want));
    stopped += r.stopped;
  }
  EXPECT_GT(stopped, 300);  // the stop path was exercised
}

}  // namespace
}  // namespace strata::sampling
