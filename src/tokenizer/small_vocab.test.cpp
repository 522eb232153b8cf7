// The tokenizer on small vocabularies built in memory, where every expected id follows from the
// rules by hand: merge priority, special-token matching, metadata defaults and errors.

#include <gtest/gtest.h>

#include <cstring>

#include "src/tokenizer/tokenizer.hpp"

namespace strata::tokenizer {
namespace {

/// Writes a GGUF (version 3, no tensors) holding only metadata.
class gguf_writer {
 public:
  gguf_writer& str(const std::string& key, const std::string& v) {
    head(key, 8);
    put_str(v);
    return *this;
  }
  gguf_writer& i32(const std::string& key, std::int32_t v) {
    head(key, 5);
    put(v);
    return *this;
  }
  gguf_writer& boolean(const std::string& key, bool v) {
    head(key, 7);
    put(static_cast<std::uint8_t>(v));
    return *this;
  }
  gguf_writer& strs(const std::string& key, const std::vector<std::string>& v) {
    head(key, 9);
    put(std::uint32_t{8});
    put(static_cast<std::uint64_t>(v.size()));
    for (const auto& s : v) put_str(s);
    return *this;
  }
  gguf_writer& i32s(const std::string& key, const std::vector<std::int32_t>& v) {
    head(key, 9);
    put(std::uint32_t{5});
    put(static_cast<std::uint64_t>(v.size()));
    for (auto x : v) put(x);
    return *this;
  }
  gguf_writer& f32s(const std::string& key, const std::vector<float>& v) {
    head(key, 9);
    put(std::uint32_t{6});
    put(static_cast<std::uint64_t>(v.size()));
    for (auto x : v) put(x);
    return *this;
  }
  /// The file bytes; they must outlive the gguf_file parsed from them.
  const std::vector<std::byte>& bytes() {
    out_.clear();
    auto raw = [&](const void* p, std::size_t n) {
      const auto* b = static_cast<const std::byte*>(p);
      out_.insert(out_.end(), b, b + n);
    };
    std::uint32_t magic = 0x46554747u, version = 3;
    std::uint64_t n_tensors = 0;
    raw(&magic, 4);
    raw(&version, 4);
    raw(&n_tensors, 8);
    raw(&n_kv_, 8);
    out_.insert(out_.end(), body_.begin(), body_.end());
    return out_;
  }

 private:
  template <class T>
  void put(T v) {
    std::byte b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    body_.insert(body_.end(), b, b + sizeof(T));
  }
  void put_str(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    for (char c : s) body_.push_back(static_cast<std::byte>(c));
  }
  void head(const std::string& key, std::uint32_t type) {
    ++n_kv_;
    put_str(key);
    put(type);
  }
  std::uint64_t n_kv_ = 0;
  std::vector<std::byte> body_, out_;
};

result<tokenizer> load(gguf_writer& w) {
  auto f = model::gguf_file::parse(w.bytes());
  if (!f) return std::move(f).err();
  return tokenizer::from_gguf(*f);
}

const std::string k_space = "\xC4\xA0";  // byte-level spelling of ' '

/// A byte-level BPE vocabulary over "abc <>" with the given merges.
gguf_writer bpe(const std::vector<std::string>& merges, const std::string& pre = "gpt-2") {
  gguf_writer w;
  w.str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", pre)
      .strs("tokenizer.ggml.tokens", {"a", "b", "c", k_space, "ab", "bc", "abc", k_space + "a", "<x>", "<x><y>", "@@", "<|im_end|>", "<", ">", "x", "y", "@"})
      .i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 3, 1, 1, 1, 1, 1})
      .i32("tokenizer.ggml.eos_token_id", 11)
      .strs("tokenizer.ggml.merges", merges);
  return w;
}

TEST(small_vocab, bpe_merges_the_lowest_rank_pair_first) {
  auto w1 = bpe({"a b", "ab c", "b c"});
  auto t1 = load(w1);
  ASSERT_TRUE(t1) << t1.err().message;
  EXPECT_EQ(t1->encode("abc", false, false), (std::vector<std::int32_t>{6}));  // a+b, then ab+c
  auto w2 = bpe({"b c", "a b", "ab c"});
  auto t2 = load(w2);
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->encode("abc", false, false), (std::vector<std::int32_t>{0, 5}));  // b+c first leaves a, bc
  EXPECT_EQ(t2->encode("a a", false, false), (std::vector<std::int32_t>{0, 3, 0}));  // no merge "Ġ a"
  auto w3 = bpe({k_space + " a"});
  auto t3 = load(w3);
  ASSERT_TRUE(t3);
  EXPECT_EQ(t3->encode("a a", false, false), (std::vector<std::int32_t>{0, 7}));
  EXPECT_EQ(t3->decode(t3->encode("a a", false, false)), "a a");
}

TEST(small_vocab, special_tokens_match_longest_first_and_user_defined_ones_always) {
  auto w = bpe({"a b"});
  auto t = load(w);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<x><y>@@<x>ab", false, true), (std::vector<std::int32_t>{9, 10, 8, 4}));
  // Without parse_special only the user-defined "@@" is matched; the rest is plain text.
  EXPECT_EQ(t->encode("<x>@@", false, false), (std::vector<std::int32_t>{12, 14, 13, 10}));
  EXPECT_EQ(t->decode(t->encode("<x><y>@@", false, true), true), "<x><y>@@");
  EXPECT_EQ(t->decode(t->encode("<x><y>@@", false, true), false), "@@");
}

TEST(small_vocab, end_of_turn_tokens_end_generation) {
  auto w = bpe({});
  auto t = load(w);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->is_eog(11));
  EXPECT_EQ(t->eos_id(), 11);
  EXPECT_FALSE(t->is_eog(8));
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->encode("a", true, false), (std::vector<std::int32_t>{0}));  // no BOS to add
}

TEST(small_vocab, an_unknown_pre_tokenizer_falls_back_to_the_default_one) {
  auto w = bpe({"a b"}, "no-such-pre-tokenizer");
  auto t = load(w);
  ASSERT_TRUE(t) << t.err().message;
  EXPECT_EQ(t->pre_name(), "default");
  EXPECT_EQ(t->encode("ab", false, false), (std::vector<std::int32_t>{4}));
}

TEST(small_vocab, a_bpe_vocabulary_without_merges_or_an_unknown_model_is_an_error) {
  gguf_writer w;
  w.str("tokenizer.ggml.model", "gpt2").strs("tokenizer.ggml.tokens", {"a"});
  auto t = load(w);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.err().code, errc::corrupt_data);
  gguf_writer w2;
  w2.str("tokenizer.ggml.model", "bert").strs("tokenizer.ggml.tokens", {"a"});
  auto t2 = load(w2);
  ASSERT_FALSE(t2);
  EXPECT_EQ(t2.err().code, errc::unsupported);
}

/// A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then pieces with scores.
gguf_writer spm(const std::vector<std::pair<std::string, float>>& pieces, bool add_space_prefix) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<std::int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
    types.push_back(6);
    scores.push_back(0);
  }
  for (const auto& [text, score] : pieces) {
    tokens.push_back(text);
    types.push_back(1);
    scores.push_back(score);
  }
  gguf_writer w;
  w.str("tokenizer.ggml.model", "llama").strs("tokenizer.ggml.tokens", tokens).i32s("tokenizer.ggml.token_type", types);
  w.f32s("tokenizer.ggml.scores", scores).boolean("tokenizer.ggml.add_space_prefix", add_space_prefix);
  return w;
}

const std::string k_sp = "\xE2\x96\x81";  // U+2581

TEST(small_vocab, sentencepiece_merges_the_highest_scoring_pair_first) {
  // ids: 259 = ▁, 260 = a, 261 = b, 262 = ▁a, 263 = ab
  auto w1 = spm({{k_sp, -5}, {"a", -5}, {"b", -5}, {k_sp + "a", -1}, {"ab", -2}}, true);
  auto t1 = load(w1);
  ASSERT_TRUE(t1) << t1.err().message;
  EXPECT_EQ(t1->encode("ab", false, false), (std::vector<std::int32_t>{262, 261}));
  auto w2 = spm({{k_sp, -5}, {"a", -5}, {"b", -5}, {k_sp + "a", -2}, {"ab", -1}}, true);
  auto t2 = load(w2);
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->encode("ab", false, false), (std::vector<std::int32_t>{259, 263}));
  EXPECT_EQ(t2->decode(t2->encode("ab", false, false)), "ab");
  // Defaults of a SentencePiece vocabulary: BOS 1 added, EOS 2 not.
  EXPECT_EQ(t2->encode("ab", true, false), (std::vector<std::int32_t>{1, 259, 263}));
  EXPECT_TRUE(t2->is_eog(2));
}

TEST(small_vocab, sentencepiece_without_space_prefix_and_with_byte_fallback) {
  auto w = spm({{k_sp, -5}, {"a", -5}, {"b", -5}, {k_sp + "a", -1}, {"ab", -2}}, false);
  auto t = load(w);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("ab", false, false), (std::vector<std::int32_t>{263}));
  // "é" has no piece: its two bytes, 0xC3 0xA9, are byte tokens 3 + byte.
  EXPECT_EQ(t->encode("a\xC3\xA9", false, false), (std::vector<std::int32_t>{260, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->decode(t->encode("a\xC3\xA9 b", false, false)), "a\xC3\xA9 b");
  EXPECT_EQ(t->token_to_piece(3 + 0x41), "A");
}

}  // namespace
}  // namespace strata::tokenizer
