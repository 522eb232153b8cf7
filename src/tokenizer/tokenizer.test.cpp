#include "src/tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace strata::tokenizer {
namespace {

const std::string k_vocab = std::string(STRATA_SHARED_DIR) + "/vocab/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& all, const std::string& sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t at; (at = all.find(sep, start)) != std::string::npos; start = at + sep.size()) out.push_back(all.substr(start, at - start));
  out.push_back(all.substr(start));
  return out;
}

class vocab_cases : public ::testing::TestWithParam<std::string> {};

TEST_P(vocab_cases, every_text_gives_the_reference_token_ids) {
  const std::string name = GetParam();
  auto f = model::gguf_file::open(k_vocab + name);
  ASSERT_TRUE(f) << f.err().message;
  auto tok = tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok) << tok.err().message;
  auto texts = split(slurp(k_vocab + name + ".inp"), "\n__ggml_vocab_test__\n");
  auto lines = split(slurp(k_vocab + name + ".out"), "\n");
  if (!texts.empty() && texts.back().empty()) texts.pop_back();
  ASSERT_GE(lines.size(), texts.size());
  int passed = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::vector<std::int32_t> want;
    std::istringstream is(lines[i]);
    for (std::int32_t id; is >> id;) want.push_back(id);
    auto got = tok->encode(texts[i], false, false);
    EXPECT_EQ(got, want) << name << " case " << i << ": " << texts[i];
    if (got == want) ++passed;
    // Decoding gives the text back (SentencePiece may drop a leading space it added itself).
    std::string back = tok->decode(got);
    if (tok->model_name() == "gpt2") EXPECT_EQ(back, texts[i]) << name << " case " << i;
  }
  std::printf("%s: %d / %zu cases\n", name.c_str(), passed, texts.size());
}

std::vector<std::string> vocab_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(k_vocab))
    if (e.path().extension() == ".gguf") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(shared_vocab, vocab_cases, ::testing::ValuesIn(vocab_files()), [](const auto& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});

TEST(tokenizer, special_tokens_are_parsed_only_when_asked_and_bos_follows_the_metadata) {
  auto f = model::gguf_file::open(k_vocab + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(f);
  auto tok = tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok);
  auto with = tok->encode("</s>hi", true, true);
  ASSERT_GE(with.size(), 3u);
  EXPECT_EQ(with[0], tok->bos_id());
  EXPECT_EQ(with[1], tok->eos_id());
  auto without = tok->encode("</s>hi", false, false);
  EXPECT_EQ(std::count(without.begin(), without.end(), tok->eos_id()), 0);
  EXPECT_TRUE(tok->is_eog(tok->eos_id()));
}

TEST(tokenizer, random_bytes_round_trip_through_byte_level_bpe) {
  auto f = model::gguf_file::open(k_vocab + "ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(f);
  auto tok = tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok);
  std::random_device rd;
  auto seed = rd();
  std::mt19937 rng(seed);
  for (int round = 0; round < 200; ++round) {
    std::string s(static_cast<std::size_t>(rng() % 64), '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);  // invalid UTF-8 included
    auto ids = tok->encode(s, false, false);
    EXPECT_EQ(tok->decode(ids), s) << "seed " << seed;
  }
}

}  // namespace
}  // namespace strata::tokenizer
