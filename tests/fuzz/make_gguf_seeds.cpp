// Writes the fuzzer's seed corpus from a vocabulary GGUF: its raw first 4 KiB, and a small valid
// file with every metadata key of the vocabulary (arrays cut to 32 elements) plus a few tensors.
//
//   make_gguf_seeds VOCAB.gguf OUT_DIR

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/model/gguf_file.hpp"
#include "src/model/gguf_writer.hpp"

using strata::model::gguf_file;
using strata::model::gguf_type;
using strata::model::gguf_writer;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf OUT_DIR\n", argv[0]);
    return 2;
  }
  auto vocab = gguf_file::open(argv[1]);
  if (!vocab) {
    std::fprintf(stderr, "%s\n", vocab.err().message.c_str());
    return 1;
  }
  const std::filesystem::path out = argv[2];
  std::filesystem::create_directories(out);
  {
    std::ifstream in(argv[1], std::ios::binary);
    std::vector<char> head(4096);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(out / "vocab_head.bin", std::ios::binary).write(head.data(), in.gcount());
  }
  constexpr std::size_t keep = 32;
  gguf_writer w;
  for (const std::string& k : vocab->keys()) {
    if (vocab->type_of(k) != gguf_type::array) {
      (void)w.copy_kv(*vocab, k);
    } else if (auto s = vocab->get_string_array(k)) {
      s->resize(std::min(s->size(), keep));
      w.add_string_array(k, *s);
    } else if (auto f = vocab->get_float_array(k); f && vocab->array_type(k) == gguf_type::f32) {
      f->resize(std::min(f->size(), keep));
      w.add_f32_array(k, *f);
    } else if (auto i = vocab->get_int_array(k)) {
      std::vector<std::int32_t> v(i->begin(), i->begin() + static_cast<std::ptrdiff_t>(std::min(i->size(), keep)));
      w.add_i32_array(k, v);
    }
  }
  std::vector<std::byte> f32(64 * 4, std::byte{0x3f}), q8(34 * 2, std::byte{1}), q4k(144, std::byte{2});
  (void)w.add_tensor("token_embd.weight", 0, {16, 4}, f32);
  (void)w.add_tensor("blk.0.attn_q.weight", 8, {32, 2}, q8);
  (void)w.add_tensor("blk.0.ffn_down.weight", 12, {256}, q4k);
  if (auto r = w.write_file(out / "vocab_small.gguf"); !r) {
    std::fprintf(stderr, "%s\n", r.err().message.c_str());
    return 1;
  }
  return 0;
}
