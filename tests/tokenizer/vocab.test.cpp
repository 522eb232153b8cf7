// Every text of ../shared/vocab/X.gguf.inp must give exactly the token ids of the same line of
// X.gguf.out (no BOS/EOS, special tokens not parsed), and decoding them must give the text back.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/model/gguf_file.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::tokenizer {
namespace {

const std::string k_vocab_dir = std::string(STRATA_SHARED_DIR) + "/vocab/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The texts of an .inp file: separated by lines "__ggml_vocab_test__"; the file ends with one.
std::vector<std::string> read_texts(const std::string& path) {
  const std::string all = slurp(path), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t at; (at = all.find(sep, start)) != std::string::npos; start = at + sep.size()) out.push_back(all.substr(start, at - start));
  return out;
}

std::vector<std::vector<std::int32_t>> read_ids(const std::string& path) {
  std::vector<std::vector<std::int32_t>> out;
  std::istringstream all(slurp(path));
  for (std::string line; std::getline(all, line);) {
    std::vector<std::int32_t> ids;
    std::istringstream is(line);
    for (std::int32_t id; is >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::vector<std::string> vocab_files() {
  std::vector<std::string> out;
  if (std::filesystem::is_directory(k_vocab_dir))
    for (const auto& e : std::filesystem::directory_iterator(k_vocab_dir))
      if (e.path().extension() == ".gguf") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(shared_vocab, the_directory_holds_the_nine_reference_vocabularies) { EXPECT_EQ(vocab_files().size(), 9u) << k_vocab_dir; }

class shared_vocab_cases : public ::testing::TestWithParam<std::string> {};

TEST_P(shared_vocab_cases, every_text_gives_exactly_the_reference_ids_and_decodes_back) {
  const std::string name = GetParam();
  auto f = model::gguf_file::open(k_vocab_dir + name);
  ASSERT_TRUE(f) << f.err().message;
  auto tok = tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok) << tok.err().message;
  auto texts = read_texts(k_vocab_dir + name + ".inp");
  auto want = read_ids(k_vocab_dir + name + ".out");
  ASSERT_FALSE(texts.empty());
  ASSERT_EQ(texts.size(), want.size()) << name;
  std::size_t passed = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto got = tok->encode(texts[i], false, false);
    EXPECT_EQ(got, want[i]) << name << " case " << i << ": \"" << texts[i] << "\"";
    if (got == want[i]) ++passed;
    // SentencePiece takes back only the one space it added, so every text decodes to itself.
    EXPECT_EQ(tok->decode(got), texts[i]) << name << " case " << i;
  }
  std::printf("%s: %zu / %zu texts exact\n", name.c_str(), passed, texts.size());
}

INSTANTIATE_TEST_SUITE_P(all, shared_vocab_cases, ::testing::ValuesIn(vocab_files()), [](const auto& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});

}  // namespace
}  // namespace strata::tokenizer
