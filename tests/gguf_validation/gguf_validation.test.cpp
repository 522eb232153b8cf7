// Corrupt GGUF files, each made from a valid shared model with one thing wrong, must be refused by
// the load path (model::load, then tokenizer::from_gguf, as `strata serve` does) with a message
// that names the key or tensor at fault; the shared models, and the real ones when cached here,
// must still load.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include "src/model/gguf_file.hpp"
#include "src/model/gguf_writer.hpp"
#include "src/model/model.hpp"
#include "src/tokenizer/tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using model::gguf_file;
using model::gguf_type;
using model::gguf_writer;

const fs::path k_shared = STRATA_SHARED_DIR;
const fs::path k_llama = k_shared / "models" / "tiny-llama-spm-f16.gguf";
const fs::path k_qwen2 = k_shared / "models" / "tiny-qwen2-gpt2-f16.gguf";

using test_support::temp_dir;

/// Loads like the server: the model, then its tokenizer. "" when both succeed, else the error.
std::string load_error(const fs::path& path) {
  auto m = model::model::load(path);
  if (!m) return m.err().message;
  auto t = tokenizer::tokenizer::from_gguf((*m)->file);
  if (!t) return t.err().message;
  return "";
}

/// Writes `base` again with its metadata edited by `edit` (tensors copied as they are).
fs::path rewrite(const fs::path& base, const fs::path& out, const std::function<void(const gguf_file&, gguf_writer&)>& edit) {
  auto f = gguf_file::open(base);
  EXPECT_TRUE(f) << f.err().message;
  gguf_writer w;
  for (const std::string& k : f->keys()) EXPECT_TRUE(w.copy_kv(*f, k));
  edit(*f, w);
  for (const model::gguf_tensor& t : f->tensors()) {
    std::vector<std::int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const std::byte>(t.data, t.n_bytes)));
  }
  auto r = w.write_file(out);
  EXPECT_TRUE(r) << r.err().message;
  return out;
}

/// Writes `base` with a tensor's type or offset field overwritten in its table entry.
fs::path patch_tensor(const fs::path& base, const fs::path& out, const std::string& name, std::optional<std::uint32_t> type,
                      std::optional<std::uint64_t> offset) {
  std::ifstream in(base, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The table entry: u64 name length, the name, u32 dims, u64 per dim, u32 type, u64 offset.
  std::string needle(8, '\0');
  const std::uint64_t len = name.size();
  std::memcpy(needle.data(), &len, 8);
  needle += name;
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << name;
  std::size_t pos = static_cast<std::size_t>(it - bytes.begin()) + needle.size();
  std::uint32_t n_dims = 0;
  std::memcpy(&n_dims, &bytes[pos], 4);
  pos += 4 + 8 * n_dims;
  if (type) std::memcpy(&bytes[pos], &*type, 4);
  if (offset) std::memcpy(&bytes[pos + 4], &*offset, 8);
  std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out;
}

/// One corrupt variant: how to make it, and what its error must contain.
struct corrupt_case {
  std::string name;
  std::function<fs::path(const temp_dir&)> make;
  std::vector<std::string> expected;  // each must appear in the message
};

std::vector<corrupt_case> corrupt_cases() {
  std::vector<corrupt_case> cases;
  auto meta = [&](std::string name, fs::path base, std::function<void(const gguf_file&, gguf_writer&)> edit, std::vector<std::string> expected) {
    cases.push_back({name, [=](const temp_dir& d) { return rewrite(base, d.file(name + ".gguf"), edit); }, expected});
  };
  auto tensor = [&](std::string name, std::string tensor_name, std::optional<std::uint32_t> type, std::optional<std::uint64_t> offset,
                    std::vector<std::string> expected) {
    cases.push_back({name, [=](const temp_dir& d) { return patch_tensor(k_llama, d.file(name + ".gguf"), tensor_name, type, offset); }, expected});
  };
  const std::string scores = "tokenizer.ggml.scores", types = "tokenizer.ggml.token_type";

  meta("scores_of_integers", k_llama, [=](const gguf_file& f, gguf_writer& w) {
    std::vector<std::int32_t> v(*f.array_size(scores), 0);
    w.add_i32_array(scores, v);
  }, {scores});
  meta("scores_of_strings", k_llama, [=](const gguf_file& f, gguf_writer& w) {
    std::vector<std::string> v(*f.array_size(scores), "1.0");
    w.add_string_array(scores, v);
  }, {scores});
  meta("scores_too_short", k_llama, [=](const gguf_file& f, gguf_writer& w) {
    auto v = *f.get_float_array(scores);
    v.pop_back();
    w.add_f32_array(scores, v);
  }, {scores});
  meta("scores_a_scalar", k_llama, [=](const gguf_file&, gguf_writer& w) { w.add_f32(scores, 0.5f); }, {scores});
  meta("token_types_of_floats", k_llama, [=](const gguf_file& f, gguf_writer& w) {
    std::vector<float> v(*f.array_size(types), 1.0f);
    w.add_f32_array(types, v);
  }, {types});
  meta("token_types_too_long", k_qwen2, [=](const gguf_file& f, gguf_writer& w) {
    std::vector<std::int32_t> v(*f.array_size(types) + 1, 1);
    w.add_i32_array(types, v);
  }, {types});
  meta("token_types_a_scalar", k_qwen2, [=](const gguf_file&, gguf_writer& w) { w.add_i32(types, 1); }, {types});
  meta("tokens_fewer_than_the_vocabulary", k_llama, [=](const gguf_file& f, gguf_writer& w) {
    // Scores and types cut alike, so that only the vocabulary size disagrees.
    auto toks = *f.get_string_array("tokenizer.ggml.tokens");
    toks.resize(toks.size() - 100);
    w.add_string_array("tokenizer.ggml.tokens", toks);
    auto sc = *f.get_float_array(scores);
    sc.resize(toks.size());
    w.add_f32_array(scores, sc);
    auto ty = *f.get_int_array(types);
    std::vector<std::int32_t> ty32(ty.begin(), ty.begin() + static_cast<std::ptrdiff_t>(toks.size()));
    w.add_i32_array(types, ty32);
  }, {"tokenizer.ggml.tokens"});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::pair<const char*, float> bad_floats[] = {{"nan", nan}, {"inf", inf}, {"zero", 0.0f}, {"negative", -1.0f}};
  for (auto [label, v] : bad_floats) {
    meta(std::string("rope_base_") + label, k_llama, [v](const gguf_file&, gguf_writer& w) { w.add_f32("llama.rope.freq_base", v); },
         {"llama.rope.freq_base"});
    meta(std::string("norm_eps_") + label, k_llama,
         [v](const gguf_file&, gguf_writer& w) { w.add_f32("llama.attention.layer_norm_rms_epsilon", v); },
         {"llama.attention.layer_norm_rms_epsilon"});
  }
  meta("bos_outside_the_vocabulary", k_llama, [](const gguf_file& f, gguf_writer& w) {
    w.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(*f.array_size("tokenizer.ggml.tokens")));
  }, {"tokenizer.ggml.bos_token_id"});
  meta("eos_outside_the_vocabulary", k_qwen2, [](const gguf_file&, gguf_writer& w) { w.add_u32("tokenizer.ggml.eos_token_id", 1u << 31); },
       {"tokenizer.ggml.eos_token_id"});
  // q8_0 (type 8) takes 34 bytes per 32 f16 values' 64: a gap before the next tensor.
  tensor("tensor_type_smaller_than_its_bytes", "blk.1.ffn_down.weight", 8u, std::nullopt, {"blk.1.ffn_down.weight"});
  // f32 (type 0) takes twice the bytes of f16: it runs into the next tensor.
  tensor("tensor_type_larger_than_its_bytes", "blk.0.attn_q.weight", 0u, std::nullopt, {"blk.0.attn_q.weight", "overlap"});
  tensor("tensor_offset_past_the_end", "blk.0.attn_q.weight", std::nullopt, 1ull << 40, {"blk.0.attn_q.weight", "past the end"});
  tensor("tensors_overlapping", "blk.0.attn_q.weight", std::nullopt, 0, {"blk.0.attn_q.weight", "overlap"});
  return cases;
}

TEST(gguf_validation, every_corrupt_variant_is_refused_naming_the_key_or_tensor) {
  temp_dir dir;
  ASSERT_EQ(load_error(k_llama), "");
  for (const corrupt_case& c : corrupt_cases()) {
    SCOPED_TRACE(c.name);
    fs::path p = c.make(dir);
    std::string msg = load_error(p);
    EXPECT_NE(msg, "") << c.name << " was loaded";
    for (const std::string& e : c.expected) EXPECT_NE(msg.find(e), std::string::npos) << c.name << ": '" << msg << "' does not name " << e;
    fs::remove(p);
  }
}

TEST(gguf_validation, every_shared_model_still_loads) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(k_shared / "models")) {
    if (e.path().extension() != ".gguf") continue;
    EXPECT_EQ(load_error(e.path()), "") << e.path();
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(gguf_validation, every_shared_vocabulary_still_loads) {
  for (const auto& e : fs::directory_iterator(k_shared / "vocab")) {
    if (e.path().extension() != ".gguf") continue;
    auto f = gguf_file::open(e.path());
    ASSERT_TRUE(f) << f.err().message;
    auto t = tokenizer::tokenizer::from_gguf(*f);
    // Vocabularies of tokenizer models strata does not run are refused as unsupported, nothing else.
    if (!t) {
      EXPECT_EQ(t.err().code, errc::unsupported) << e.path() << ": " << t.err().message;
    }
  }
}

TEST(gguf_validation, the_real_models_cached_here_still_load) {
  const char* home = std::getenv("HOME");
  const fs::path dir = fs::path(home ? home : "/nonexistent") / ".cache" / "strata" / "models";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    EXPECT_EQ(load_error(e.path()), "") << e.path();
    ++n;
  }
  if (n == 0) GTEST_SKIP() << "no model in " << dir;
}

}  // namespace
}  // namespace strata
