#include "src/model/gguf_file.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "src/model/gguf_writer.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

/// Raw GGUF bytes written field by field, for files the writer would refuse to produce.
class raw_gguf {
 public:
  raw_gguf& u8(std::uint8_t v) { return put(v); }
  raw_gguf& u32(std::uint32_t v) { return put(v); }
  raw_gguf& u64(std::uint64_t v) { return put(v); }
  raw_gguf& f32(float v) { return put(v); }
  raw_gguf& str(const std::string& s) {
    u64(s.size());
    for (char c : s) b_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  raw_gguf& header(std::uint64_t n_tensors, std::uint64_t n_kv, std::uint32_t version = 3) {
    return u32(0x46554747u).u32(version).u64(n_tensors).u64(n_kv);
  }
  raw_gguf& kv_u32(const std::string& key, std::uint32_t v) { return str(key).u32(4).u32(v); }
  raw_gguf& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
  /// A tensor info: name, dims, type, offset.
  raw_gguf& tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type, std::uint64_t offset) {
    str(name).u32(static_cast<std::uint32_t>(ne.size()));
    for (auto n : ne) u64(n);
    return u32(type).u64(offset);
  }
  raw_gguf& pad(std::size_t alignment = 32) {
    while (b_.size() % alignment) b_.push_back(std::byte{0});
    return *this;
  }
  raw_gguf& zeros(std::size_t n) {
    b_.insert(b_.end(), n, std::byte{0});
    return *this;
  }
  const std::vector<std::byte>& bytes() const { return b_; }

 private:
  template <class T>
  raw_gguf& put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  std::vector<std::byte> b_;
};

/// Parses and returns the error message ("" if it parsed).
std::string error_of(const std::vector<std::byte>& bytes) {
  auto f = gguf_file::parse(bytes);
  return f ? std::string() : f.err().message;
}

/// A small valid file with metadata of several types and three tensors.
std::vector<std::byte> small_file() {
  gguf_writer w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_f32("llama.rope.freq_base", 10000.0f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  std::vector<std::string> tokens{"<unk>", "a", "bc"};
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  std::vector<float> scores{0.0f, -1.0f, -2.5f};
  w.add_f32_array("tokenizer.ggml.scores", scores);
  std::vector<std::byte> f32_data(4 * 8 * 4, std::byte{1});
  std::vector<std::byte> f16_data(32 * 2 * 2, std::byte{2});
  std::vector<std::byte> q8_data(34 * 2, std::byte{3});
  EXPECT_TRUE(w.add_tensor("a.weight", 0, {8, 4}, f32_data));
  EXPECT_TRUE(w.add_tensor("b.weight", 1, {32, 2}, f16_data));
  EXPECT_TRUE(w.add_tensor("c.weight", 8, {64}, q8_data));
  return *w.write_memory();
}

TEST(gguf_file, parses_a_small_file_and_points_tensors_into_the_bytes) {
  auto bytes = small_file();
  auto f = gguf_file::parse(bytes);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->architecture(), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 2);
  EXPECT_EQ(f->get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token"), true);
  ASSERT_EQ(f->tensors().size(), 3u);
  const gguf_tensor* c = f->find_tensor("c.weight");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->n_dims, 1);
  EXPECT_EQ(c->n_bytes, 68u);
  EXPECT_EQ(c->n_elements(), 64);
  EXPECT_GE(c->data, bytes.data());
  EXPECT_LE(c->data + c->n_bytes, bytes.data() + bytes.size());
  EXPECT_EQ(c->data[0], std::byte{3});
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
  EXPECT_EQ(f->file_size(), bytes.size());
}

TEST(gguf_file, accepts_version_2) {
  auto bytes = small_file();
  bytes[4] = std::byte{2};
  auto f = gguf_file::parse(bytes);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->version(), 2u);
}

TEST(gguf_file, rejects_a_bad_magic) {
  auto bytes = small_file();
  bytes[0] = std::byte{'X'};
  EXPECT_NE(error_of(bytes).find("magic"), std::string::npos);
}

TEST(gguf_file, rejects_versions_other_than_2_and_3) {
  for (std::uint32_t v : {0u, 1u, 4u, 1000u}) {
    auto msg = error_of(raw_gguf().header(0, 0, v).bytes());
    EXPECT_NE(msg.find("version " + std::to_string(v)), std::string::npos) << msg;
  }
}

TEST(gguf_file, rejects_a_big_endian_file_by_name) {
  auto msg = error_of(raw_gguf().header(0, 0, 0x03000000u).bytes());
  EXPECT_NE(msg.find("big-endian"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_counts_that_cannot_fit_in_the_file) {
  EXPECT_NE(error_of(raw_gguf().header(0, 1ull << 40).zeros(64).bytes()).find("metadata count"), std::string::npos);
  EXPECT_NE(error_of(raw_gguf().header(~0ull, 0).zeros(64).bytes()).find("tensor count"), std::string::npos);
}

TEST(gguf_file, rejects_a_string_longer_than_the_file) {
  auto msg = error_of(raw_gguf().header(0, 1).str("general.name").u32(8).u64(1ull << 62).zeros(16).bytes());
  EXPECT_NE(msg.find("string length"), std::string::npos) << msg;
  msg = error_of(raw_gguf().header(0, 1).u64(500).zeros(16).bytes());
  EXPECT_NE(msg.find("metadata entry 0"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_unknown_value_type) {
  auto msg = error_of(raw_gguf().header(0, 1).str("k").u32(13).u32(0).bytes());
  EXPECT_NE(msg.find("key 'k': unknown value type 13"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_array_with_an_unknown_element_type) {
  auto msg = error_of(raw_gguf().header(0, 1).str("arr").u32(9).u32(77).u64(1).u32(0).bytes());
  EXPECT_NE(msg.find("key 'arr': unknown value type 77"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_array_longer_than_the_file) {
  auto msg = error_of(raw_gguf().header(0, 1).str("arr").u32(9).u32(4).u64(1ull << 61).zeros(8).bytes());
  EXPECT_NE(msg.find("runs past the end"), std::string::npos) << msg;
  msg = error_of(raw_gguf().header(0, 1).str("arr").u32(9).u32(8).u64(1000).str("x").bytes());
  EXPECT_NE(msg.find("runs past the end"), std::string::npos) << msg;
}

TEST(gguf_file, reads_an_array_of_arrays_and_rejects_deeper_nesting) {
  // [[1, 2], [3]] of u32
  raw_gguf ok;
  ok.header(0, 1).str("nested").u32(9).u32(9).u64(2).u32(4).u64(2).u32(1).u32(2).u32(4).u64(1).u32(3);
  auto f = gguf_file::parse(ok.bytes());
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->array_size("nested"), 2u);
  EXPECT_EQ(f->array_type("nested"), gguf_type::array);
  EXPECT_FALSE(f->get_int_array("nested"));  // not a flat integer array
  raw_gguf deep;
  deep.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 6; ++i) deep.u32(9).u64(1);
  deep.u32(4).u64(1).u32(0);
  auto msg = error_of(deep.bytes());
  EXPECT_NE(msg.find("nested too deeply"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_a_duplicate_key) {
  auto msg = error_of(raw_gguf().header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2).bytes());
  EXPECT_NE(msg.find("duplicate metadata key 'a.b'"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_empty_key_and_an_empty_tensor_name) {
  EXPECT_NE(error_of(raw_gguf().header(0, 1).kv_u32("", 1).bytes()).find("empty key"), std::string::npos);
  EXPECT_NE(error_of(raw_gguf().header(1, 0).tensor("", {32}, 0, 0).pad().zeros(128).bytes()).find("empty name"), std::string::npos);
}

TEST(gguf_file, rejects_duplicate_tensor_names) {
  auto msg = error_of(raw_gguf().header(2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("duplicate tensor name 't'"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_zero_or_more_than_four_dimensions) {
  EXPECT_NE(error_of(raw_gguf().header(1, 0).tensor("t", {}, 0, 0).pad().zeros(64).bytes()).find("0 dimensions"), std::string::npos);
  auto msg = error_of(raw_gguf().header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("tensor 't': 5 dimensions"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_a_zero_dimension) {
  auto msg = error_of(raw_gguf().header(1, 0).tensor("t", {8, 0}, 0, 0).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("tensor 't': dimension 1 is 0"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_element_count_that_overflows) {
  auto msg = error_of(raw_gguf().header(1, 0).tensor("t", {1ull << 32, 1ull << 32, 1ull << 32}, 0, 0).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("tensor 't': element count overflows"), std::string::npos) << msg;
  msg = error_of(raw_gguf().header(1, 0).tensor("t", {~0ull}, 0, 0).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("tensor 't'"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_unsupported_tensor_type_naming_the_tensor_and_the_type) {
  auto msg = error_of(raw_gguf().header(1, 0).tensor("blk.0.ffn_up.weight", {256}, 16, 0).pad().zeros(256).bytes());
  EXPECT_NE(msg.find("blk.0.ffn_up.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("iq2_xxs"), std::string::npos) << msg;
  auto f = gguf_file::parse(raw_gguf().header(1, 0).tensor("t", {32}, 9999, 0).pad().zeros(256).bytes());
  ASSERT_FALSE(f);
  EXPECT_EQ(f.err().code, errc::unsupported);
}

TEST(gguf_file, rejects_a_row_length_that_is_not_a_multiple_of_the_block) {
  auto msg = error_of(raw_gguf().header(1, 0).tensor("t", {48}, 8, 0).pad().zeros(256).bytes());
  EXPECT_NE(msg.find("row length 48"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_an_alignment_that_is_not_a_power_of_two) {
  for (std::uint32_t a : {0u, 3u, 48u}) {
    auto msg = error_of(raw_gguf().header(0, 1).kv_u32("general.alignment", a).bytes());
    EXPECT_NE(msg.find("general.alignment must be a power of two"), std::string::npos) << msg;
  }
  auto msg = error_of(raw_gguf().header(0, 1).kv_str("general.alignment", "32").bytes());
  EXPECT_NE(msg.find("general.alignment"), std::string::npos) << msg;
}

TEST(gguf_file, honors_a_custom_alignment) {
  raw_gguf g;
  g.header(2, 1).kv_u32("general.alignment", 64).tensor("a", {4}, 0, 0).tensor("b", {4}, 0, 64).pad(64).zeros(128);
  auto f = gguf_file::parse(g.bytes());
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ((f->find_tensor("b")->data - g.bytes().data()) % 64, 0);
  raw_gguf bad;
  bad.header(2, 1).kv_u32("general.alignment", 64).tensor("a", {4}, 0, 0).tensor("b", {4}, 0, 32).pad(64).zeros(128);
  EXPECT_NE(error_of(bad.bytes()).find("tensor 'b': offset 32 is not aligned to 64"), std::string::npos);
}

TEST(gguf_file, rejects_a_misaligned_offset) {
  auto msg = error_of(raw_gguf().header(1, 0).tensor("t", {4}, 0, 4).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("tensor 't': offset 4 is not aligned to 32"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_a_tensor_that_ends_past_the_file) {
  raw_gguf g;
  g.header(1, 0).tensor("blk.0.attn_q.weight", {64, 64}, 0, 0).pad().zeros(1000);
  auto f = gguf_file::parse(g.bytes());
  ASSERT_FALSE(f);
  EXPECT_EQ(f.err().code, errc::corrupt_data);
  const std::uint64_t data_start = g.bytes().size() - 1000;
  const std::string expected = "tensor 'blk.0.attn_q.weight': data ends at byte " + std::to_string(data_start + 64 * 64 * 4) +
                               " past the end of the file (" + std::to_string(g.bytes().size()) + " bytes)";
  EXPECT_EQ(f.err().message, expected);
  auto msg = error_of(raw_gguf().header(1, 0).tensor("t", {4}, 0, 1ull << 60).pad().zeros(64).bytes());
  EXPECT_NE(msg.find("tensor 't': data starts at offset"), std::string::npos) << msg;
}

TEST(gguf_file, rejects_overlapping_tensors) {
  auto msg = error_of(raw_gguf().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad().zeros(256).bytes());
  EXPECT_NE(msg.find("tensors 'a' and 'b' overlap"), std::string::npos) << msg;
}

TEST(gguf_file, typed_getters_refuse_the_wrong_type) {
  auto bytes = small_file();
  auto f = gguf_file::parse(bytes);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->get_string("llama.block_count"));
  EXPECT_FALSE(f->get_int("general.architecture"));
  EXPECT_FALSE(f->get_bool("llama.block_count"));
  EXPECT_FALSE(f->get_string_array("tokenizer.ggml.scores"));
  EXPECT_FALSE(f->get_int_array("tokenizer.ggml.scores"));
  EXPECT_FALSE(f->get_float_array("tokenizer.ggml.tokens"));
  EXPECT_FALSE(f->get_int("no.such.key"));
  EXPECT_FALSE(f->type_of("no.such.key"));
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores"), (std::vector<float>{0.0f, -1.0f, -2.5f}));
}

TEST(gguf_file, every_truncation_of_a_small_file_fails_cleanly) {
  auto bytes = small_file();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    // A fresh allocation of exactly n bytes, so that AddressSanitizer catches any read past it.
    std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    auto f = gguf_file::parse(prefix);
    ASSERT_FALSE(f) << "a prefix of " << n << " bytes parsed";
    ASSERT_FALSE(f.err().message.empty());
  }
}

TEST(gguf_file, random_bit_flips_never_crash) {
  auto bytes = small_file();
  std::mt19937_64 rng(test_seed());
  std::uniform_int_distribution<std::size_t> pos(0, bytes.size() * 8 - 1);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    auto copy = bytes;
    int flips = 1 + i % 4;
    for (int k = 0; k < flips; ++k) {
      std::size_t bit = pos(rng);
      copy[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    }
    auto f = gguf_file::parse(copy);
    if (f) {
      ++parsed;
      // Whatever parsed must be self-consistent: every tensor inside the bytes.
      for (const gguf_tensor& t : f->tensors()) {
        ASSERT_GE(t.data, copy.data());
        ASSERT_LE(t.data + t.n_bytes, copy.data() + copy.size());
      }
      for (const std::string& k : f->keys()) (void)f->raw_value(k);
      (void)f->get_string_array("tokenizer.ggml.tokens");
    } else {
      ASSERT_FALSE(f.err().message.empty());
    }
  }
  // Flips inside tensor data leave a valid file.
  EXPECT_GT(parsed, 0);
}

TEST(gguf_file, open_reports_a_missing_file) {
  auto f = gguf_file::open("/nonexistent/strata/model.gguf");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.err().code, errc::io_error);
  EXPECT_NE(f.err().message.find("/nonexistent/strata/model.gguf"), std::string::npos);
}

TEST(gguf_file, opens_the_shared_models_with_their_known_layout) {
  const std::filesystem::path dir = std::filesystem::path(STRATA_SHARED_DIR) / "models";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no shared models";
  struct expected {
    const char* file;
    const char* arch;
    std::size_t tensors;
    std::uint64_t vocab;
  };
  const expected all[] = {
      {"tiny-llama-spm-f16.gguf", "llama", 20, 32000},        {"tiny-qwen2-gpt2-f16.gguf", "qwen2", 26, 50257},
      {"tiny-qwen3-starcoder-f16.gguf", "qwen3", 24, 49152},  {"tiny-gemma2-spm-f16.gguf", "gemma2", 46, 32000},
      {"small-llama-spm-q8_0.gguf", "llama", 39, 32000},      {"small-llama-spm-q4_0.gguf", "llama", 39, 32000},
      {"small-llama-spm-q4_k_m.gguf", "llama", 39, 32000},    {"small-llama-spm-q5_k_m.gguf", "llama", 39, 32000},
      {"small-llama-spm-q6_k.gguf", "llama", 39, 32000},
  };
  for (const expected& e : all) {
    auto start = std::chrono::steady_clock::now();
    auto f = gguf_file::open(dir / e.file);
    auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(f) << e.file << ": " << f.err().message;
    EXPECT_EQ(f->architecture(), e.arch) << e.file;
    EXPECT_EQ(f->tensors().size(), e.tensors) << e.file;
    EXPECT_EQ(f->array_size("tokenizer.ggml.tokens"), e.vocab) << e.file;
    EXPECT_EQ(f->get_int(std::string(e.arch) + ".vocab_size"), static_cast<std::int64_t>(e.vocab)) << e.file;
    const gguf_tensor* embd = f->find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr) << e.file;
    EXPECT_EQ(embd->ne[1], static_cast<std::int64_t>(e.vocab)) << e.file;
    EXPECT_LT(took, std::chrono::seconds(2)) << e.file;
  }
}

TEST(gguf_file, opens_every_shared_vocabulary) {
  const std::filesystem::path dir = std::filesystem::path(STRATA_SHARED_DIR) / "vocab";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no shared vocabularies";
  int opened = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    auto f = gguf_file::open(entry.path());
    ASSERT_TRUE(f) << entry.path() << ": " << f.err().message;
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens) << entry.path();
    EXPECT_GT(tokens->size(), 1000u) << entry.path();
    auto model = f->get_string("tokenizer.ggml.model");
    ASSERT_TRUE(model) << entry.path();
    EXPECT_TRUE(*model == "gpt2" || *model == "llama") << entry.path() << ": " << *model;
    if (entry.path().filename() == "ggml-vocab-gpt-2.gguf") {
      EXPECT_EQ(tokens->size(), 50257u);
      EXPECT_EQ((*tokens)[50256], "<|endoftext|>");
      EXPECT_EQ(f->array_size("tokenizer.ggml.merges"), 50000u);
    }
    ++opened;
  }
  EXPECT_EQ(opened, 9);
}

}  // namespace
}  // namespace strata::model
