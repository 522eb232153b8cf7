// Hyperparameters and weight binding on small GGUF files built in memory.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model {
namespace {

/// Builds GGUF v3 bytes: integer, float and string metadata, and f32 (or any typed, zero-filled)
/// tensors.
class gguf_bytes {
 public:
  gguf_bytes& u32(const std::string& key, std::uint32_t v) { return kv(key, 4, &v, 4); }
  gguf_bytes& f32(const std::string& key, float v) { return kv(key, 6, &v, 4); }
  /// An array of booleans.
  gguf_bytes& bools(const std::string& key, const std::vector<bool>& v) {
    std::vector<std::byte> b;
    put(b, std::uint32_t{7});
    put(b, static_cast<std::uint64_t>(v.size()));
    for (bool x : v) put(b, static_cast<std::uint8_t>(x));
    return kv(key, 9, b.data(), b.size());
  }
  gguf_bytes& str(const std::string& key, const std::string& v) {
    std::vector<std::byte> b;
    put_string(b, v);
    return kv(key, 8, b.data(), b.size());
  }
  gguf_bytes& erase(const std::string& key) {
    kvs_.erase(key);
    return *this;
  }
  /// A tensor of shape [cols, rows] (rows 1: a vector) of GGML type `type` and `bytes` bytes.
  gguf_bytes& tensor(const std::string& name, std::int64_t cols, std::int64_t rows, std::uint32_t type = 0, std::size_t bytes = 0) {
    tensors_[name] = {cols, rows, type, bytes ? bytes : static_cast<std::size_t>(cols * rows * 4)};
    return *this;
  }
  gguf_bytes& drop_tensor(const std::string& name) {
    tensors_.erase(name);
    return *this;
  }

  std::vector<std::byte> build() const {
    std::vector<std::byte> b;
    put(b, std::uint32_t{0x46554747});  // "GGUF"
    put(b, std::uint32_t{3});
    put(b, static_cast<std::uint64_t>(tensors_.size()));
    put(b, static_cast<std::uint64_t>(kvs_.size()));
    for (const auto& [k, v] : kvs_) {
      put_string(b, k);
      b.insert(b.end(), v.begin(), v.end());
    }
    std::uint64_t offset = 0;
    for (const auto& [name, t] : tensors_) {
      put_string(b, name);
      const bool vec = t.rows == 1;
      put(b, std::uint32_t{vec ? 1u : 2u});
      put(b, static_cast<std::uint64_t>(t.cols));
      if (!vec) put(b, static_cast<std::uint64_t>(t.rows));
      put(b, t.type);
      put(b, offset);
      offset += (t.bytes + 31) / 32 * 32;
    }
    b.resize((b.size() + 31) / 32 * 32);
    b.resize(b.size() + offset);
    return b;
  }

 private:
  struct tensor_spec {
    std::int64_t cols, rows;
    std::uint32_t type;
    std::size_t bytes;
  };
  template <class T>
  static void put(std::vector<std::byte>& b, T v) {
    const auto at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  static void put_string(std::vector<std::byte>& b, const std::string& s) {
    put(b, static_cast<std::uint64_t>(s.size()));
    const auto at = b.size();
    b.resize(at + s.size());
    std::memcpy(b.data() + at, s.data(), s.size());
  }
  gguf_bytes& kv(const std::string& key, std::uint32_t type, const void* v, std::size_t n) {
    std::vector<std::byte> b;
    put(b, type);
    b.resize(4 + n);
    std::memcpy(b.data() + 4, v, n);
    kvs_[key] = std::move(b);
    return *this;
  }
  std::map<std::string, std::vector<std::byte>> kvs_;
  std::map<std::string, tensor_spec> tensors_;
};

constexpr int k_embd = 8, k_head = 2, k_head_kv = 1, k_ff = 16, k_vocab = 10;

/// A one-layer model of the given architecture with every tensor it needs, all f32.
gguf_bytes tiny_model(const std::string& a) {
  gguf_bytes g;
  g.str("general.architecture", a)
      .u32(a + ".embedding_length", k_embd)
      .u32(a + ".block_count", 1)
      .u32(a + ".feed_forward_length", k_ff)
      .u32(a + ".attention.head_count", k_head)
      .u32(a + ".attention.head_count_kv", k_head_kv)
      .f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f)
      .u32(a + ".context_length", 128)
      .f32(a + ".rope.freq_base", 500000.0f)
      .u32(a + ".vocab_size", k_vocab);
  const int hd = k_embd / k_head, kvd = k_head_kv * hd;
  g.tensor("token_embd.weight", k_embd, k_vocab).tensor("output_norm.weight", k_embd, 1);
  g.tensor("blk.0.attn_norm.weight", k_embd, 1).tensor("blk.0.ffn_norm.weight", k_embd, 1);
  g.tensor("blk.0.attn_output.weight", k_embd, k_embd).tensor("blk.0.ffn_down.weight", k_ff, k_embd);
  if (a == "phi3") {
    g.tensor("blk.0.attn_qkv.weight", k_embd, k_embd + 2 * kvd).tensor("blk.0.ffn_up.weight", k_embd, 2 * k_ff);
  } else {
    g.tensor("blk.0.attn_q.weight", k_embd, k_embd).tensor("blk.0.attn_k.weight", k_embd, kvd).tensor("blk.0.attn_v.weight", k_embd, kvd);
    g.tensor("blk.0.ffn_gate.weight", k_embd, k_ff).tensor("blk.0.ffn_up.weight", k_embd, k_ff);
  }
  if (a == "qwen2") g.tensor("blk.0.attn_q.bias", k_embd, 1).tensor("blk.0.attn_k.bias", kvd, 1).tensor("blk.0.attn_v.bias", kvd, 1);
  if (a == "qwen3" || a == "gemma3") g.tensor("blk.0.attn_q_norm.weight", hd, 1).tensor("blk.0.attn_k_norm.weight", hd, 1);
  if (a == "gemma2" || a == "gemma3") {
    g.u32(a + ".attention.sliding_window", 4);
    g.tensor("blk.0.post_attention_norm.weight", k_embd, 1).tensor("blk.0.post_ffw_norm.weight", k_embd, 1);
  }
  return g;
}

/// Parses bytes kept alive by the caller.
struct parsed {
  explicit parsed(const gguf_bytes& g) : bytes(g.build()), file(gguf_file::parse(bytes)) {}
  std::vector<std::byte> bytes;
  result<gguf_file> file;
};

TEST(hparams, reads_every_supported_architecture) {
  for (const char* a : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) {
    parsed p(tiny_model(a));
    ASSERT_TRUE(p.file) << p.file.err().message;
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << a << ": " << h.err().message;
    EXPECT_STREQ(arch_name(h->architecture), a);
    EXPECT_EQ(h->n_embd, k_embd);
    EXPECT_EQ(h->n_head_kv, k_head_kv);
    EXPECT_EQ(h->head_dim, k_embd / k_head);
    EXPECT_EQ(h->n_vocab, k_vocab);
    EXPECT_FLOAT_EQ(h->rope_freq_base, 500000.0f);
    EXPECT_EQ(h->rope_neox, std::string(a) != "llama") << a;
  }
}

TEST(hparams, takes_gemma2_window_caps_and_embedding_scale) {
  parsed p(tiny_model("gemma2").f32("gemma2.attn_logit_softcapping", 40.0f));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->sliding_window, 4);
  EXPECT_TRUE(h->sliding(0));
  EXPECT_FALSE(h->sliding(1));
  EXPECT_FLOAT_EQ(h->attn_softcap, 40.0f);
  EXPECT_FLOAT_EQ(h->final_softcap, 30.0f);  // absent: Gemma 2's own
  EXPECT_FLOAT_EQ(h->embed_scale, std::sqrt(static_cast<float>(k_embd)));
}

/// The layers of a gemma3 model that slide, as a string of 's' (sliding) and 'g' (global).
std::string sliding_pattern(const hparams& h) {
  std::string s;
  for (int il = 0; il < h.n_layer; ++il) s += h.sliding(il) ? 's' : 'g';
  return s;
}

TEST(hparams, gemma3_slides_five_layers_of_six_with_a_local_rope_base) {
  // Gemma 3 270M's keys: 18 layers, a window of 512, no pattern key, no local base.
  parsed p(tiny_model("gemma3").u32("gemma3.block_count", 18).u32("gemma3.attention.sliding_window", 512));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->architecture, arch::gemma3);
  EXPECT_EQ(h->sliding_window, 512);
  EXPECT_EQ(sliding_pattern(*h), "sssssgsssssgsssssg");
  EXPECT_FLOAT_EQ(h->rope_base(0), 10000.0f);  // local layers: llama.cpp's default local base
  EXPECT_FLOAT_EQ(h->rope_base(5), 500000.0f);  // global layers: rope.freq_base
  EXPECT_FLOAT_EQ(h->rope_scale(0), 1.0f);
  EXPECT_FLOAT_EQ(h->rope_scale(5), 1.0f);
  EXPECT_FLOAT_EQ(h->attn_scale, 1.0f / std::sqrt(static_cast<float>(k_embd / k_head)));
  EXPECT_FLOAT_EQ(h->attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(h->final_softcap, 0.0f);  // absent: none
  EXPECT_FLOAT_EQ(h->embed_scale, std::sqrt(static_cast<float>(k_embd)));
  EXPECT_TRUE(h->rope_neox);
}

TEST(hparams, gemma3_scales_only_the_global_layers_rope) {
  // A local base from the file, and a linear factor with or without its type key.
  for (bool typed : {true, false}) {
    gguf_bytes g = tiny_model("gemma3");
    g.u32("gemma3.block_count", 6).f32("gemma3.rope.freq_base_swa", 20000.0f).f32("gemma3.rope.scaling.factor", 8.0f);
    if (typed) g.str("gemma3.rope.scaling.type", "linear");
    parsed p(g);
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << h.err().message;
    EXPECT_FLOAT_EQ(h->rope_base(4), 20000.0f);
    EXPECT_FLOAT_EQ(h->rope_scale(4), 1.0f);
    EXPECT_FLOAT_EQ(h->rope_base(5), 500000.0f);
    EXPECT_FLOAT_EQ(h->rope_scale(5), 0.125f);
  }
}

TEST(hparams, gemma3_takes_the_sliding_layers_from_the_metadata) {
  {
    parsed p(tiny_model("gemma3").u32("gemma3.block_count", 8).u32("gemma3.attention.sliding_window_pattern", 4));
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << h.err().message;
    EXPECT_EQ(sliding_pattern(*h), "sssgsssg");
  }
  {
    parsed p(tiny_model("gemma3").u32("gemma3.block_count", 4).bools("gemma3.attention.sliding_window_pattern", {false, true, true, false}));
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << h.err().message;
    EXPECT_EQ(sliding_pattern(*h), "gssg");
  }
  {
    parsed p(tiny_model("gemma3").u32("gemma3.block_count", 4).bools("gemma3.attention.sliding_window_pattern", {true, false}));
    auto h = hparams::from_gguf(*p.file);
    ASSERT_FALSE(h);
    EXPECT_NE(h.err().message.find("gemma3.attention.sliding_window_pattern"), std::string::npos) << h.err().message;
  }
  {
    // No window: every layer is global, with the global base.
    parsed p(tiny_model("gemma3").u32("gemma3.block_count", 6).erase("gemma3.attention.sliding_window"));
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << h.err().message;
    EXPECT_EQ(sliding_pattern(*h), "gggggg");
    EXPECT_FLOAT_EQ(h->rope_base(0), 500000.0f);
  }
}

TEST(hparams, gemma3_takes_a_final_softcap_and_the_27b_attention_scale) {
  parsed p(tiny_model("gemma3").u32("gemma3.block_count", 62).f32("gemma3.final_logit_softcapping", 30.0f)
               .u32("gemma3.attention.key_length", 16).u32("gemma3.attention.value_length", 16));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_FLOAT_EQ(h->final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(h->attn_scale, 1.0f / std::sqrt(static_cast<float>(k_embd / k_head)));  // not 1/sqrt(16)
}

TEST(hparams, gemma2_keeps_one_rope_base_for_every_layer) {
  parsed p(tiny_model("gemma2").u32("gemma2.block_count", 4));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(sliding_pattern(*h), "sgsg");
  for (int il = 0; il < 4; ++il) EXPECT_FLOAT_EQ(h->rope_base(il), 500000.0f) << il;
}

TEST(hparams, takes_qwen3_head_length_from_key_length) {
  parsed p(tiny_model("qwen3").u32("qwen3.attention.key_length", 16).u32("qwen3.attention.value_length", 16));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->head_dim, 16);
  EXPECT_EQ(h->q_dim(), 32);
  EXPECT_FLOAT_EQ(h->attn_scale, 0.25f);
}

TEST(hparams, linear_rope_scaling_divides_the_frequency) {
  parsed p(tiny_model("llama").str("llama.rope.scaling.type", "linear").f32("llama.rope.scaling.factor", 4.0f));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_FLOAT_EQ(h->rope_freq_scale, 0.25f);
}

TEST(hparams, names_the_missing_key) {
  for (const char* key : {"qwen2.block_count", "qwen2.attention.layer_norm_rms_epsilon", "qwen2.embedding_length"}) {
    parsed p(tiny_model("qwen2").erase(key));
    auto h = hparams::from_gguf(*p.file);
    ASSERT_FALSE(h) << key;
    EXPECT_NE(h.err().message.find(key), std::string::npos) << h.err().message;
  }
  parsed p(tiny_model("gemma2").erase("gemma2.attention.sliding_window"));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_FALSE(h);
  EXPECT_NE(h.err().message.find("gemma2.attention.sliding_window"), std::string::npos) << h.err().message;
}

TEST(hparams, names_inconsistent_keys) {
  {
    parsed p(tiny_model("llama").u32("llama.attention.head_count", 3));  // 8 is no multiple of 3
    auto h = hparams::from_gguf(*p.file);
    ASSERT_FALSE(h);
    EXPECT_NE(h.err().message.find("llama.attention.head_count"), std::string::npos) << h.err().message;
  }
  {
    parsed p(tiny_model("llama").u32("llama.attention.head_count_kv", 3));  // more kv heads than heads
    auto h = hparams::from_gguf(*p.file);
    ASSERT_FALSE(h);
    EXPECT_NE(h.err().message.find("llama.attention.head_count_kv"), std::string::npos) << h.err().message;
  }
}

TEST(hparams, names_an_unknown_architecture) {
  parsed p(tiny_model("llama").str("general.architecture", "mamba"));
  auto h = hparams::from_gguf(*p.file);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.err().code, errc::unsupported);
  EXPECT_NE(h.err().message.find("mamba"), std::string::npos) << h.err().message;
}

TEST(weights, binds_every_architecture_and_ties_the_output_to_the_embeddings) {
  for (const char* a : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) {
    parsed p(tiny_model(a));
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << h.err().message;
    auto w = model_weights::bind(*p.file, *h);
    ASSERT_TRUE(w) << a << ": " << w.err().message;
    ASSERT_EQ(w->layers.size(), 1u);
    EXPECT_EQ(w->output.data, w->token_embd.data) << a;
    EXPECT_EQ(w->token_embd.rows, k_vocab);
    const layer_weights& L = w->layers[0];
    EXPECT_EQ(static_cast<bool>(L.wqkv), std::string(a) == "phi3");
    EXPECT_EQ(static_cast<bool>(L.bq), std::string(a) == "qwen2");
    EXPECT_EQ(static_cast<bool>(L.q_norm), std::string(a) == "qwen3" || std::string(a) == "gemma3");
    EXPECT_EQ(static_cast<bool>(L.post_ffn_norm), std::string(a) == "gemma2" || std::string(a) == "gemma3");
  }
}

TEST(weights, an_output_matrix_is_used_when_present) {
  parsed p(tiny_model("llama").tensor("output.weight", k_embd, k_vocab));
  auto h = hparams::from_gguf(*p.file);
  auto w = model_weights::bind(*p.file, *h);
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_NE(w->output.data, w->token_embd.data);
  // Per decoded token: every matrix and vector once, one embedding row is negligible and not counted.
  std::uint64_t total = 0;
  for (const auto& t : p.file->tensors()) total += t.n_bytes;
  EXPECT_EQ(w->bytes_per_token, total - static_cast<std::uint64_t>(k_embd * k_vocab * 4));
}

TEST(weights, names_a_missing_tensor) {
  parsed p(tiny_model("qwen2").drop_tensor("blk.0.attn_k.bias"));
  auto h = hparams::from_gguf(*p.file);
  auto w = model_weights::bind(*p.file, *h);
  ASSERT_FALSE(w);
  EXPECT_NE(w.err().message.find("blk.0.attn_k.bias"), std::string::npos) << w.err().message;
}

TEST(weights, names_a_tensor_of_the_wrong_shape) {
  parsed p(tiny_model("llama").tensor("blk.0.ffn_down.weight", k_ff, k_embd + 1));
  auto h = hparams::from_gguf(*p.file);
  auto w = model_weights::bind(*p.file, *h);
  ASSERT_FALSE(w);
  EXPECT_NE(w.err().message.find("blk.0.ffn_down.weight"), std::string::npos) << w.err().message;
}

TEST(weights, names_a_tensor_of_an_unsupported_type) {
  // GGML type 10 is q2_K (256-element blocks of 84 bytes): the reader or the binder refuses it,
  // either way naming the tensor.
  parsed p(tiny_model("llama").tensor("blk.0.ffn_gate.weight", 256, k_ff, 10, 84 * k_ff));
  std::string message;
  if (!p.file) {
    message = p.file.err().message;
  } else {
    auto h = hparams::from_gguf(*p.file);
    ASSERT_TRUE(h) << h.err().message;
    auto w = model_weights::bind(*p.file, *h);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.err().code, errc::unsupported);
    message = w.err().message;
  }
  EXPECT_NE(message.find("blk.0.ffn_gate.weight"), std::string::npos) << message;
}

}  // namespace
}  // namespace strata::model
