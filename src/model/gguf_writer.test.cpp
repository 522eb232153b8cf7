#include "src/model/gguf_writer.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "src/model/gguf_file.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::model {
namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng() & 0xff);
  return b;
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("strata_gguf_writer_" + std::to_string(::getpid()) + "_" + name);
}

TEST(gguf_writer, round_trips_every_metadata_type) {
  gguf_writer w;
  w.add_u8("u8", 200);
  w.add_i8("i8", -100);
  w.add_u16("u16", 60000);
  w.add_i16("i16", -30000);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_u64("u64", 1ull << 60);
  w.add_i64("i64", -(1ll << 60));
  w.add_f32("f32", 1.5f);
  w.add_f64("f64", 0.1);
  w.add_bool("bool", true);
  w.add_string("str", "héllo");
  std::vector<std::string> strs{"", "a", "<|im_start|>"};
  w.add_string_array("strs", strs);
  std::vector<std::int32_t> i32s{-1, 0, 7};
  w.add_i32_array("i32s", i32s);
  std::vector<std::int64_t> i64s{1ll << 40, -5};
  w.add_i64_array("i64s", i64s);
  std::vector<std::uint32_t> u32s{3, 4};
  w.add_u32_array("u32s", u32s);
  std::vector<float> f32s{0.25f, -3.0f};
  w.add_f32_array("f32s", f32s);
  std::vector<double> f64s{1e-9};
  w.add_f64_array("f64s", f64s);
  bool bool_array[] = {true, false, true};
  w.add_bool_array("bools", bool_array);
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes) << bytes.err().message;
  auto f = gguf_file::parse(*bytes);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->type_of("u8"), gguf_type::u8);
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -100);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -30000);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(f->get_int("u64"), 1ll << 60);
  EXPECT_EQ(f->get_int("i64"), -(1ll << 60));
  EXPECT_EQ(f->type_of("f32"), gguf_type::f32);
  EXPECT_EQ(f->get_float("f32"), 1.5);
  EXPECT_EQ(f->get_float("f64"), 0.1);
  EXPECT_EQ(f->get_bool("bool"), true);
  EXPECT_EQ(f->get_string("str"), "héllo");
  EXPECT_EQ(f->get_string_array("strs"), (std::vector<std::string_view>{"", "a", "<|im_start|>"}));
  EXPECT_EQ(f->get_int_array("i32s"), (std::vector<std::int64_t>{-1, 0, 7}));
  EXPECT_EQ(f->array_type("i32s"), gguf_type::i32);
  EXPECT_EQ(f->get_int_array("i64s"), (std::vector<std::int64_t>{1ll << 40, -5}));
  EXPECT_EQ(f->get_int_array("u32s"), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(f->get_float_array("f32s"), (std::vector<float>{0.25f, -3.0f}));
  EXPECT_EQ(f->get_float_array("f64s"), (std::vector<float>{1e-9f}));
  EXPECT_EQ(f->get_int_array("bools"), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(f->get_int("general.alignment"), 32);
  EXPECT_EQ(f->keys().front(), "u8");
  EXPECT_EQ(f->keys().back(), "general.alignment");
}

TEST(gguf_writer, replacing_a_key_keeps_its_position) {
  gguf_writer w;
  w.add_u32("a", 1);
  w.add_string("b", "x");
  w.add_string("a", "now a string");
  EXPECT_TRUE(w.has("a"));
  w.remove("b");
  EXPECT_FALSE(w.has("b"));
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes);
  auto f = gguf_file::parse(*bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->keys(), (std::vector<std::string>{"a", "general.alignment"}));
  EXPECT_EQ(f->get_string("a"), "now a string");
}

TEST(gguf_writer, round_trips_random_tensors_of_every_type) {
  std::mt19937_64 rng(test_seed());
  struct spec {
    std::uint32_t type;
    std::int64_t block;
    std::size_t block_bytes;
  };
  const spec types[] = {{0, 1, 4}, {1, 1, 2}, {30, 1, 2}, {2, 32, 18}, {8, 32, 34}, {12, 256, 144}, {13, 256, 176}, {14, 256, 210}};
  gguf_writer w;
  std::vector<std::vector<std::byte>> datas;
  std::vector<std::vector<std::int64_t>> shapes;
  for (std::size_t i = 0; i < std::size(types); ++i) {
    const spec& s = types[i];
    std::vector<std::int64_t> ne{s.block * static_cast<std::int64_t>(1 + rng() % 3), static_cast<std::int64_t>(1 + rng() % 5)};
    if (i % 2) ne.push_back(static_cast<std::int64_t>(1 + rng() % 2));
    std::size_t n = static_cast<std::size_t>(ne[0] / s.block) * s.block_bytes;
    for (std::size_t d = 1; d < ne.size(); ++d) n *= static_cast<std::size_t>(ne[d]);
    datas.push_back(random_bytes(n, rng));
    shapes.push_back(ne);
    ASSERT_TRUE(w.add_tensor("t" + std::to_string(i), s.type, ne, datas.back()));
  }
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes) << bytes.err().message;
  EXPECT_EQ(bytes->size(), w.file_size());
  auto f = gguf_file::parse(*bytes);
  ASSERT_TRUE(f) << f.err().message;
  ASSERT_EQ(f->tensors().size(), std::size(types));
  for (std::size_t i = 0; i < std::size(types); ++i) {
    const gguf_tensor& t = f->tensors()[i];
    EXPECT_EQ(t.name, "t" + std::to_string(i));
    EXPECT_EQ(t.type, types[i].type);
    EXPECT_EQ(t.n_dims, static_cast<int>(shapes[i].size()));
    for (std::size_t d = 0; d < shapes[i].size(); ++d) EXPECT_EQ(t.ne[d], shapes[i][d]);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ((t.data - bytes->data()) % 32, 0);
    ASSERT_EQ(t.n_bytes, datas[i].size());
    EXPECT_EQ(std::memcmp(t.data, datas[i].data(), t.n_bytes), 0) << t.name;
  }
}

TEST(gguf_writer, streams_tensor_data_in_pieces_to_a_file) {
  gguf_writer w;
  w.add_string("general.architecture", "llama");
  const std::int64_t ne[] = {64, 1000};
  // Each row is produced on demand: row r holds the value r everywhere.
  ASSERT_TRUE(w.add_tensor("big", 0, ne, [](const gguf_writer::tensor_sink& sink) -> result<void> {
    std::vector<float> row(64);
    for (int r = 0; r < 1000; ++r) {
      std::fill(row.begin(), row.end(), static_cast<float>(r));
      if (auto ok = sink(std::as_bytes(std::span<const float>(row))); !ok) return ok;
    }
    return {};
  }));
  const std::int64_t small[] = {3};
  std::vector<float> three{1, 2, 3};
  ASSERT_TRUE(w.add_tensor("small", 0, small, std::as_bytes(std::span<const float>(three))));
  auto path = temp_path("stream.gguf");
  std::vector<std::size_t> progress;
  ASSERT_TRUE(w.write_file(path, [&](std::size_t done, std::size_t n, std::uint64_t written, std::uint64_t total) {
    EXPECT_EQ(n, 2u);
    EXPECT_LE(written, total);
    progress.push_back(done);
  }));
  EXPECT_EQ(progress, (std::vector<std::size_t>{1, 2}));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".part"));
  auto f = gguf_file::open(path);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->file_size(), w.file_size());
  const gguf_tensor* big = f->find_tensor("big");
  ASSERT_NE(big, nullptr);
  float v;
  std::memcpy(&v, big->data + (777 * 64 + 5) * 4, 4);
  EXPECT_EQ(v, 777.0f);
  std::memcpy(&v, f->find_tensor("small")->data + 8, 4);
  EXPECT_EQ(v, 3.0f);
  std::filesystem::remove(path);
}

TEST(gguf_writer, a_source_that_produces_the_wrong_byte_count_fails_and_leaves_no_file) {
  for (std::size_t produce : {std::size_t{8}, std::size_t{24}}) {
    gguf_writer w;
    const std::int64_t ne[] = {4};
    ASSERT_TRUE(w.add_tensor("t", 0, ne, [produce](const gguf_writer::tensor_sink& sink) {
      std::vector<std::byte> b(produce);
      return sink(b);
    }));
    auto path = temp_path("short.gguf");
    auto r = w.write_file(path);
    ASSERT_FALSE(r);
    EXPECT_NE(r.err().message.find("tensor 't'"), std::string::npos) << r.err().message;
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".part"));
  }
}

TEST(gguf_writer, a_failing_source_fails_the_write) {
  gguf_writer w;
  const std::int64_t ne[] = {4};
  ASSERT_TRUE(w.add_tensor("t", 0, ne, [](const gguf_writer::tensor_sink&) -> result<void> { return fail(errc::io_error, "disk on fire"); }));
  auto r = w.write_memory();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().message, "tensor 't': disk on fire");
}

TEST(gguf_writer, rejects_bad_tensor_declarations) {
  gguf_writer w;
  std::vector<std::byte> data(128);
  EXPECT_FALSE(w.add_tensor("t", 16, {32}, data));   // iq2_xxs: unsupported
  EXPECT_FALSE(w.add_tensor("t", 8, {48}, data));    // q8_0 row not a multiple of 32
  EXPECT_FALSE(w.add_tensor("t", 0, {0}, data));     // empty dimension
  EXPECT_FALSE(w.add_tensor("t", 0, {1, 1, 1, 1, 1}, std::span<const std::byte>(data).first(4)));
  EXPECT_FALSE(w.add_tensor("t", 0, {8}, data));     // 128 bytes for 32 given
  EXPECT_FALSE(w.add_tensor("", 0, {32}, data));
  EXPECT_TRUE(w.add_tensor("t", 0, {32}, data));
  EXPECT_FALSE(w.add_tensor("t", 0, {32}, data));    // duplicate
  EXPECT_EQ(w.tensor_count(), 1u);
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes);
  EXPECT_TRUE(gguf_file::parse(*bytes));
}

TEST(gguf_writer, copies_metadata_of_any_type_from_another_file) {
  gguf_writer src;
  std::vector<std::string> toks{"x", "yy"};
  src.add_string_array("tokenizer.ggml.tokens", toks);
  src.add_string("tokenizer.chat_template", "{{ messages }}");
  src.add_f32("f", 2.0f);
  auto src_bytes = src.write_memory();
  ASSERT_TRUE(src_bytes);
  auto from = gguf_file::parse(*src_bytes);
  ASSERT_TRUE(from);
  gguf_writer w;
  for (const std::string& k : from->keys()) ASSERT_TRUE(w.copy_kv(*from, k));
  EXPECT_FALSE(w.copy_kv(*from, "absent"));
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes);
  auto f = gguf_file::parse(*bytes);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string_view>{"x", "yy"}));
  EXPECT_EQ(f->get_string("tokenizer.chat_template"), "{{ messages }}");
  EXPECT_EQ(f->get_float("f"), 2.0);
}

TEST(gguf_writer, copies_a_shared_vocabulary_exactly) {
  auto path = std::filesystem::path(STRATA_SHARED_DIR) / "vocab" / "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no shared vocabularies";
  auto from = gguf_file::open(path);
  ASSERT_TRUE(from) << from.err().message;
  gguf_writer w;
  for (const std::string& k : from->keys()) ASSERT_TRUE(w.copy_kv(*from, k));
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes);
  auto f = gguf_file::parse(*bytes);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"), from->get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges"), from->get_string_array("tokenizer.ggml.merges"));
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type"), from->get_int_array("tokenizer.ggml.token_type"));
}

}  // namespace
}  // namespace strata::model
