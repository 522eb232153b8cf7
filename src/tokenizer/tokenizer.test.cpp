#include "src/tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "src/common/utf8.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::tokenizer {
namespace {

const std::string k_vocab_dir = std::string(STRATA_SHARED_DIR) + "/vocab/";

/// Opens a shared vocabulary once per test binary.
const tokenizer& vocab(const std::string& name) {
  static std::map<std::string, tokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto f = model::gguf_file::open(k_vocab_dir + "ggml-vocab-" + name + ".gguf");
    EXPECT_TRUE(f) << f.err().message;
    auto t = tokenizer::from_gguf(*f);
    EXPECT_TRUE(t) << t.err().message;
    it = cache.emplace(name, std::move(*t)).first;
  }
  return it->second;
}

const std::vector<std::string> k_all = {"llama-spm", "phi-3",    "gpt-2",  "starcoder", "deepseek-llm",
                                        "deepseek-coder", "falcon", "mpt", "refact"};

/// Random valid UTF-8: words, digits, punctuation, runs of spaces/tabs/newlines, accented and
/// CJK letters, U+2581 itself, Unicode spaces and 4-byte emoji.
std::string random_text(std::mt19937& rng, std::size_t n_items) {
  static const std::vector<std::string> pieces = {
      "a", "Hello", "world", "'s", "'LL", "the", "x", "0", "42", "123456", ".", ",", "!?", "$", "<", ">", "/", "\\", "(", "\"",
      " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "é", "Äpfel", "ñ", "Привет", "Ω", "日本語", "中", "한국어",
      "\xE2\x96\x81", "\xE3\x80\x80", "\xC2\xA0", "\xF0\x9F\x98\x80", "\xF0\x9F\xA6\x99", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "…"};
  std::string s;
  for (std::size_t i = 0; i < n_items; ++i) {
    if (rng() % 4 == 0) {  // a random code point from anywhere but the surrogates
      std::uint32_t cp = 0;
      do cp = static_cast<std::uint32_t>(rng() % 0x30000);
      while (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF));
      utf8::append(s, cp);
    } else {
      s += pieces[rng() % pieces.size()];
    }
  }
  return s;
}

TEST(tokenizer, random_utf8_text_decodes_back_to_itself_in_every_vocabulary) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  for (const auto& name : k_all) {
    const tokenizer& tok = vocab(name);
    for (int round = 0; round < 40; ++round) {
      std::string s = random_text(rng, rng() % 40);
      if (tok.model_name() == "llama") {  // SentencePiece spells spaces as U+2581: that one cannot come back
        for (std::size_t at; (at = s.find("\xE2\x96\x81")) != std::string::npos;) s.replace(at, 3, "_");
      }
      auto ids = tok.encode(s, false, false);
      EXPECT_EQ(tok.decode(ids), s) << name << ", seed " << seed;
      for (std::int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << name;
    }
  }
}

TEST(tokenizer, random_bytes_round_trip_through_byte_level_bpe_and_byte_fallback) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  // Not starcoder and the like, which have no token for the 13 bytes that never occur in UTF-8,
  // nor deepseek-llm, which spells them as user-defined tokens (such as "\xC3\xBF" for 0xFF) that
  // decode as their text, as in the reference tokenizer.
  for (const auto& name : {"gpt-2", "llama-spm", "phi-3"}) {
    const tokenizer& tok = vocab(name);
    for (int round = 0; round < 100; ++round) {
      std::string s(rng() % 48, '\0');
      for (char& c : s) c = static_cast<char>(rng() % 256);  // mostly invalid UTF-8
      EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s) << name << ", seed " << seed;
    }
  }
}

TEST(tokenizer, sentencepiece_encodes_spaces_as_u2581_with_a_leading_space) {
  const tokenizer& tok = vocab("llama-spm");
  auto ids = tok.encode("Hello world", false, false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok.token_text(ids[0]), "\xE2\x96\x81Hello");
  EXPECT_EQ(tok.token_text(ids[1]), "\xE2\x96\x81world");
  EXPECT_EQ(tok.token_to_piece(ids[1]), " world");
  // A character with no token of its own is spelled with byte tokens.
  auto emoji = tok.encode("\xF0\x9F\xA6\x99", false, false);
  ASSERT_GE(emoji.size(), 4u);
  EXPECT_EQ(tok.type(emoji.back()), token_type::byte);
  EXPECT_EQ(tok.token_to_piece(emoji.back()), "\x99");
}

TEST(tokenizer, bos_and_eos_follow_the_metadata_and_architecture_defaults) {
  const tokenizer& spm = vocab("llama-spm");
  EXPECT_TRUE(spm.add_bos());
  EXPECT_FALSE(spm.add_eos());
  auto ids = spm.encode("hi", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), spm.bos_id());
  EXPECT_EQ(spm.token_text(spm.bos_id()), "<s>");
  EXPECT_EQ(spm.token_text(spm.eos_id()), "</s>");
  EXPECT_EQ(spm.encode("hi", false, false).size() + 1, ids.size());
  const tokenizer& gpt2 = vocab("gpt-2");
  EXPECT_EQ(gpt2.token_text(gpt2.eos_id()), "<|endoftext|>");
  EXPECT_EQ(gpt2.encode("hi", true, false).front() == gpt2.bos_id(), gpt2.add_bos());
}

TEST(tokenizer, control_tokens_are_parsed_only_when_asked) {
  const tokenizer& spm = vocab("llama-spm");
  auto with = spm.encode("a</s>b", false, true);
  EXPECT_EQ(std::count(with.begin(), with.end(), spm.eos_id()), 1);
  auto without = spm.encode("a</s>b", false, false);
  EXPECT_EQ(std::count(without.begin(), without.end(), spm.eos_id()), 0);
  EXPECT_EQ(spm.decode(without), "a</s>b");
  EXPECT_EQ(spm.decode(with), "a b");                        // text after a special token gets the space prefix
  EXPECT_EQ(spm.decode(with, true), "a</s> b");

  const tokenizer& gpt2 = vocab("gpt-2");
  std::string text = "x<|endoftext|><|endoftext|>y <|endoftext|>";
  auto ids = gpt2.encode(text, false, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), gpt2.eos_id()), 3);
  EXPECT_EQ(gpt2.decode(ids, true), text);
  EXPECT_EQ(gpt2.decode(ids, false), "xy ");
  auto plain = gpt2.encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), gpt2.eos_id()), 0);
  EXPECT_EQ(gpt2.decode(plain), text);
}

TEST(tokenizer, every_control_token_text_in_every_vocabulary_becomes_that_token) {
  for (const auto& name : k_all) {
    const tokenizer& tok = vocab(name);
    int checked = 0;
    for (std::int32_t id = 0; id < tok.n_vocab() && checked < 300; ++id) {
      if (tok.type(id) != token_type::control || tok.token_text(id).empty()) continue;
      ++checked;
      std::string text = "ab" + std::string(tok.token_text(id)) + "cd";
      auto ids = tok.encode(text, false, true);
      // A longer special token that contains this one's text would win; none of these have one.
      EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 1) << name << " " << tok.token_text(id);
      if (tok.model_name() == "gpt2") {
        EXPECT_EQ(tok.decode(ids, true), text) << name;
      }
    }
  }
}

TEST(tokenizer, end_of_generation_covers_eos_and_end_of_turn_tokens) {
  const tokenizer& gpt2 = vocab("gpt-2");
  EXPECT_TRUE(gpt2.is_eog(gpt2.eos_id()));
  EXPECT_FALSE(gpt2.is_eog(gpt2.encode("hello", false, false).front()));
  const tokenizer& spm = vocab("llama-spm");
  EXPECT_TRUE(spm.is_eog(spm.eos_id()));
  EXPECT_FALSE(spm.is_eog(spm.bos_id()));
  const tokenizer& phi3 = vocab("phi-3");
  if (std::int32_t end = phi3.find("<|end|>"); end >= 0) {
    EXPECT_TRUE(phi3.is_eog(end));
  }
  EXPECT_FALSE(phi3.is_eog(-1));
}

TEST(tokenizer, token_to_piece_of_byte_level_tokens_gives_raw_bytes) {
  const tokenizer& gpt2 = vocab("gpt-2");
  std::int32_t id = gpt2.find("\xC4\xA0the");  // "Ġthe"
  ASSERT_GE(id, 0);
  EXPECT_EQ(gpt2.token_to_piece(id), " the");
  EXPECT_EQ(gpt2.token_to_piece(gpt2.find("\xC4\x8A")), "\n");  // "Ċ"
  EXPECT_EQ(gpt2.token_to_piece(-5), "");
  EXPECT_EQ(gpt2.token_to_piece(gpt2.n_vocab()), "");
  EXPECT_EQ(gpt2.token_text(gpt2.n_vocab()), "");
}

TEST(tokenizer, a_long_whitespace_run_is_tokenized_whole) {
  for (const auto& name : k_all) {
    const tokenizer& tok = vocab(name);
    std::string s = "a" + std::string(20000, ' ') + "\n" + std::string(5000, '\t') + "b";
    EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s) << name;
  }
}

}  // namespace
}  // namespace strata::tokenizer
