// Writes the GGUF fuzzer's seed corpus from models: for each, its raw first 4 KiB (a truncated
// copy) and a small complete model that loads end to end: every metadata key, the vocabulary cut
// to its first 64 tokens (special ids kept inside it), the embedding and output rows cut alike,
// and every other tensor as it is.
//
//   make_gguf_seeds OUT_DIR MODEL.gguf...

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

namespace {

constexpr std::size_t k_keep = 64;

/// The model with its vocabulary cut to k_keep tokens, or an error message.
std::string write_small(const gguf_file& m, const std::filesystem::path& out) {
  const auto n_vocab = m.array_size("tokenizer.ggml.tokens");
  if (!n_vocab || *n_vocab <= k_keep) return "no vocabulary to cut";
  gguf_writer w;
  for (const std::string& k : m.keys()) {
    if (m.type_of(k) != gguf_type::array || m.array_size(k) != n_vocab) {
      (void)w.copy_kv(m, k);
    } else if (auto s = m.get_string_array(k)) {
      s->resize(k_keep);
      w.add_string_array(k, *s);
    } else if (auto f = m.get_float_array(k); f && m.array_type(k) == gguf_type::f32) {
      f->resize(k_keep);
      w.add_f32_array(k, *f);
    } else if (auto i = m.get_int_array(k)) {
      std::vector<std::int32_t> v(i->begin(), i->begin() + k_keep);
      w.add_i32_array(k, v);
    }
  }
  if (auto merges = m.get_string_array("tokenizer.ggml.merges")) {
    merges->resize(std::min(merges->size(), k_keep));
    w.add_string_array("tokenizer.ggml.merges", *merges);
  }
  const std::string arch(m.architecture());
  if (w.has(arch + ".vocab_size")) w.add_u32(arch + ".vocab_size", k_keep);
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                          "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id", "tokenizer.ggml.padding_token_id"}) {
    if (auto v = m.get_int(key); v && *v >= static_cast<std::int64_t>(k_keep)) w.add_u32(key, k_keep - 1);
  }
  for (const auto& t : m.tensors()) {
    std::vector<std::int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    std::uint64_t n_bytes = t.n_bytes;
    if (t.n_dims == 2 && static_cast<std::uint64_t>(t.ne[1]) == *n_vocab) {
      ne[1] = k_keep;
      n_bytes = t.n_bytes / *n_vocab * k_keep;
    }
    if (auto r = w.add_tensor(t.name, t.type, ne, std::span<const std::byte>(t.data, n_bytes)); !r) return r.err().message;
  }
  if (auto r = w.write_file(out); !r) return r.err().message;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR MODEL.gguf...\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path in = argv[i];
    const std::string stem = in.stem().string();
    {
      std::ifstream is(in, std::ios::binary);
      std::vector<char> head(4096);
      is.read(head.data(), static_cast<std::streamsize>(head.size()));
      std::ofstream(out / (stem + ".head.bin"), std::ios::binary).write(head.data(), is.gcount());
    }
    auto m = gguf_file::open(in);
    if (!m) {
      std::fprintf(stderr, "%s\n", m.err().message.c_str());
      return 1;
    }
    if (std::string e = write_small(*m, out / (stem + ".small.gguf")); !e.empty()) {
      std::fprintf(stderr, "%s: %s\n", in.string().c_str(), e.c_str());
      return 1;
    }
  }
  return 0;
}
