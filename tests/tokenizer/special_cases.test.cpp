// Special-looking texts of every shared vocabulary (tokens of each token type, the metadata's
// BOS/EOS/UNK/PAD, markup-like normal tokens, common special strings), alone and between other
// text, must give exactly the ids llama.cpp's llama-tokenize gives, with and without
// parse_special. tests/tokenizer/make_special_cases.py writes special_cases.json.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "src/model/gguf_file.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::tokenizer {
namespace {

const std::string k_vocab_dir = std::string(STRATA_SHARED_DIR) + "/vocab/";
const std::string k_cases = std::string(STRATA_SOURCE_DIR) + "/tests/tokenizer/special_cases.json";

boost::json::value read_cases() {
  std::ifstream in(k_cases, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return boost::json::parse(ss.str());
}

std::string ids_text(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

TEST(special_cases, every_vocabulary_matches_llama_cpp_on_special_looking_text) {
  const auto doc = read_cases();
  const auto& vocabs = doc.at("vocabs").as_object();
  ASSERT_EQ(vocabs.size(), 9u) << k_cases;
  for (const auto& [name, cases] : vocabs) {
    auto f = model::gguf_file::open(k_vocab_dir + std::string(name));
    ASSERT_TRUE(f) << name;
    auto tok = tokenizer::from_gguf(*f);
    ASSERT_TRUE(tok) << name;
    int wrong = 0;
    for (const auto& c : cases.as_array()) {
      const auto& o = c.as_object();
      const std::string text(o.at("text").as_string());
      const bool parse_special = o.at("parse_special").as_bool();
      std::vector<std::int32_t> want;
      for (const auto& id : o.at("ids").as_array()) want.push_back(static_cast<std::int32_t>(id.as_int64()));
      const auto got = tok->encode(text, false, parse_special);
      if (got != want && ++wrong <= 10)
        ADD_FAILURE() << name << " [" << text << "] parse_special " << parse_special << " (" << o.at("token").as_string()
                      << "): want " << ids_text(want) << ", got " << ids_text(got);
    }
    EXPECT_EQ(wrong, 0) << name;
  }
}

}  // namespace
}  // namespace strata::tokenizer
