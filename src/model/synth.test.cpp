#include "src/model/synth.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/quants.hpp"
#include "kernels/types.hpp"
#include "src/model/builtin_vocab.hpp"
#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"
#include "src/model/weights.hpp"

namespace strata::model {
namespace {

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("strata_synth_" + std::to_string(::getpid()) + "_" + name);
}

/// A small model's options: 2 layers, d=256 (a whole K-quant super-block per row).
synth_options small(const std::string& arch, const std::string& type, const std::string& file) {
  synth_options o;
  o.arch = arch;
  o.layers = 4;
  o.hidden = 256;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 512;
  o.vocab = "builtin";
  o.type = type;
  o.seed = 7;
  o.out = temp_path(file);
  return o;
}

std::vector<char> read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Mean and standard deviation of blk.1.attn_q.weight, dequantized from `type`.
std::pair<double, double> attn_q_spread(const gguf_file& f, kernels::dtype type) {
  const gguf_tensor* q = f.find_tensor("blk.1.attn_q.weight");
  std::vector<float> v(static_cast<std::size_t>(q->n_elements()));
  kernels::dequantize_row(type, q->data, v.data(), q->n_elements());
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / v.size();
  return {mean, std::sqrt(sq / v.size() - mean * mean)};
}

TEST(synth, every_architecture_loads_back_through_hparams_and_weights) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "qwen35", "granitehybrid"}) {
    synth_options o = small(arch, "f16", std::string(arch) + ".gguf");
    if (std::string(arch) == "qwen3") o.head_dim = 128;  // explicit head length != hidden / heads
    ASSERT_TRUE(synthesize(o)) << arch;
    auto f = gguf_file::open(o.out);
    ASSERT_TRUE(f) << arch << ": " << f.err().message;
    EXPECT_EQ(f->architecture(), arch);
    auto h = hparams::from_gguf(*f);
    ASSERT_TRUE(h) << arch << ": " << h.err().message;
    EXPECT_EQ(h->n_layer, 4);
    EXPECT_EQ(h->n_embd, 256);
    EXPECT_EQ(h->n_head_kv, 2);
    EXPECT_EQ(h->n_ctx_train, 32768);
    EXPECT_EQ(h->n_vocab, static_cast<std::int32_t>(builtin_vocab::get().tokens.size()));
    if (std::string(arch) == "qwen3") {
      EXPECT_EQ(h->head_dim, 128);
    }
    auto w = model_weights::bind(*f, *h);
    ASSERT_TRUE(w) << arch << ": " << w.err().message;
    EXPECT_EQ(f->get_int("general.file_type"), 1);
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_TRUE(f->get_string("tokenizer.chat_template"));
    const bool tied = std::string(arch) != "llama" && std::string(arch) != "phi3" && std::string(arch) != "granitehybrid";
    EXPECT_EQ(f->find_tensor("output.weight") == nullptr, tied) << arch;
    EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, 0u);
    std::filesystem::remove(o.out);
  }
}

TEST(synth, writes_the_architecture_specific_tensors_and_keys) {
  synth_options o = small("qwen2", "f16", "q2.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  ASSERT_NE(f->find_tensor("blk.3.attn_k.bias"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.3.attn_k.bias")->ne[0], 128);
  EXPECT_EQ(f->get_float("qwen2.rope.freq_base"), 1000000.0);
  std::filesystem::remove(o.out);

  o = small("phi3", "f16", "phi3.gguf");
  ASSERT_TRUE(synthesize(o));
  f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const gguf_tensor* qkv = f->find_tensor("blk.0.attn_qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->ne[1], 256 + 2 * 128);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up.weight")->ne[1], 2 * 512);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight"), nullptr);
  std::filesystem::remove(o.out);

  o = small("gemma2", "f16", "gemma2.gguf");
  ASSERT_TRUE(synthesize(o));
  f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->get_float("gemma2.attn_logit_softcapping"), 50.0);
  EXPECT_EQ(f->get_float("gemma2.final_logit_softcapping"), 30.0);
  EXPECT_TRUE(f->get_int("gemma2.attention.sliding_window"));
  EXPECT_NE(f->find_tensor("blk.1.post_ffw_norm.weight"), nullptr);
  std::filesystem::remove(o.out);

  o = small("gemma3", "f16", "gemma3.gguf");
  o.layers = 7;
  ASSERT_TRUE(synthesize(o));
  f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->has("gemma3.attn_logit_softcapping"));
  EXPECT_FALSE(f->has("gemma3.final_logit_softcapping"));
  EXPECT_EQ(f->get_int("gemma3.attention.sliding_window"), 512);
  EXPECT_EQ(f->get_float("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_NE(f->find_tensor("blk.3.attn_k_norm.weight"), nullptr);
  EXPECT_NE(f->find_tensor("blk.3.post_attention_norm.weight"), nullptr);
  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h) << h.err().message;
  for (int il = 0; il < 7; ++il) EXPECT_EQ(h->sliding(il), il != 5) << il;  // five sliding layers, then a global one
  std::filesystem::remove(o.out);
}

TEST(synth, q4_k_m_follows_llamas_mix) {
  synth_options o = small("llama", "q4_k_m", "q4km.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->get_int("general.file_type"), 15);
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  auto type_of = [&](const char* n) { return f->find_tensor(n)->type; };
  EXPECT_EQ(type_of("output.weight"), 14u);        // q6_K
  EXPECT_EQ(type_of("token_embd.weight"), 12u);    // q4_K
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), 12u);
  EXPECT_EQ(type_of("blk.0.attn_v.weight"), 12u);  // 4 layers: layers 2 and 3 get more bits
  EXPECT_EQ(type_of("blk.2.attn_v.weight"), 14u);
  EXPECT_EQ(type_of("blk.3.ffn_down.weight"), 14u);
  EXPECT_EQ(type_of("blk.1.ffn_down.weight"), 12u);
  EXPECT_EQ(type_of("output_norm.weight"), 0u);
  // The layout of the shared q4_k_m model, where one exists.
  auto shared = gguf_file::open(std::filesystem::path(STRATA_SHARED_DIR) / "models" / "small-llama-spm-q4_k_m.gguf");
  if (shared) {
    for (const gguf_tensor& t : shared->tensors()) {
      const gguf_tensor* mine = f->find_tensor(t.name);
      ASSERT_NE(mine, nullptr) << t.name;
      EXPECT_EQ(mine->type, t.type) << t.name;
      EXPECT_EQ(mine->n_dims, t.n_dims) << t.name;
    }
  }
  std::filesystem::remove(o.out);
}

/// The layout of a q4_1 file like SmolLM2-135M's: the matrices in q4_1, the tied embeddings (the
/// output: q6_K in llama's rule) in q8_0 as rows of 192 do not fill a K-quant super-block.
TEST(synth, q4_1_keeps_the_matrices_in_q4_1_and_loads_back) {
  synth_options o = small("llama", "q4_1", "q41.gguf");
  o.hidden = 192;
  o.heads = 3;
  o.kv_heads = 1;
  o.tied = true;
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->get_int("general.file_type"), 3);
  auto type_of = [&](const char* n) { return f->find_tensor(n)->type; };
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(type_of("token_embd.weight"), 8u);  // q8_0
  for (const char* n : {"blk.0.attn_q.weight", "blk.2.attn_v.weight", "blk.3.ffn_down.weight", "blk.1.ffn_gate.weight"})
    EXPECT_EQ(type_of(n), 3u) << n;
  EXPECT_EQ(type_of("blk.0.attn_norm.weight"), 0u);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up.weight")->n_bytes, 512u / 32 * 20 * 192);
  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h) << h.err().message;
  auto w = model_weights::bind(*f, *h);
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_EQ(w->layers[1].wq.type, kernels::dtype::q4_1);
  // The synthetic spread (stddev 1 / sqrt(192)) survives q4_1 steps.
  const auto [mean, stddev] = attn_q_spread(*f, kernels::dtype::q4_1);
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(stddev, 0.072, 0.01);  // 1 / sqrt(192)
  std::filesystem::remove(o.out);
}

/// q5_0, q5_1 and iq4_nl files with rows of 192: the matrices in the file's type, the tied
/// embeddings in q8_0 (q6_K in llama's rule, which rows of 192 do not fill), and the weights load
/// back with their synthetic spread.
TEST(synth, the_32_value_types_keep_the_matrices_in_their_type_and_load_back) {
  struct want {
    const char* type;
    std::int64_t ftype;
    kernels::dtype matrices;
  };
  for (auto [type, ftype, matrices] : {want{"q5_0", 8, kernels::dtype::q5_0}, want{"q5_1", 9, kernels::dtype::q5_1},
                                       want{"iq4_nl", 25, kernels::dtype::iq4_nl}}) {
    synth_options o = small("llama", type, std::string(type) + ".gguf");
    o.hidden = 192;
    o.heads = 3;
    o.kv_heads = 1;
    o.tied = true;
    ASSERT_TRUE(synthesize(o)) << type;
    auto f = gguf_file::open(o.out);
    ASSERT_TRUE(f) << f.err().message;
    EXPECT_EQ(f->get_int("general.file_type"), ftype) << type;
    const auto id = static_cast<std::uint32_t>(matrices);
    EXPECT_EQ(f->find_tensor("token_embd.weight")->type, 8u) << type;  // q8_0
    for (const char* n : {"blk.0.attn_q.weight", "blk.2.attn_v.weight", "blk.0.ffn_down.weight", "blk.3.ffn_gate.weight"})
      EXPECT_EQ(f->find_tensor(n)->type, id) << type << " " << n;
    EXPECT_EQ(f->find_tensor("blk.0.ffn_up.weight")->n_bytes, kernels::row_bytes(matrices, 192) * 512) << type;
    auto h = hparams::from_gguf(*f);
    ASSERT_TRUE(h) << h.err().message;
    auto w = model_weights::bind(*f, *h);
    ASSERT_TRUE(w) << type << ": " << w.err().message;
    EXPECT_EQ(w->layers[1].wq.type, matrices) << type;
    const auto [mean, stddev] = attn_q_spread(*f, matrices);
    EXPECT_NEAR(mean, 0.0, 0.005) << type;
    EXPECT_NEAR(stddev, 0.072, 0.01) << type;  // 1 / sqrt(192)
    std::filesystem::remove(o.out);
  }
}

/// llama.cpp's exceptions to a file's type: iq4_nl gives attn_v q5_K where four query heads
/// share it and ffn_down q5_K in the first eighth of the layers; K-quant rows that do not fill a
/// super-block fall back to q5_0 (from q4_K), q5_1 (from q5_K) and q8_0 (from q6_K).
TEST(synth, iq4_nl_and_the_k_quant_fallbacks_follow_llamas_rules) {
  auto types = [](synth_options o) {
    EXPECT_TRUE(synthesize(o)) << o.type;
    auto f = gguf_file::open(o.out);
    std::map<std::string, std::uint32_t> t;
    if (!f) return t;
    for (const gguf_tensor& x : f->tensors()) t[x.name] = x.type;
    auto h = hparams::from_gguf(*f);
    EXPECT_TRUE(h && model_weights::bind(*f, *h)) << o.type;
    std::filesystem::remove(o.out);
    return t;
  };
  synth_options o = small("llama", "iq4_nl", "iq4nl_mix.gguf");
  o.layers = 8;
  o.kv_heads = 1;  // 4 query heads per key/value head
  auto t = types(o);
  EXPECT_EQ(t["blk.0.attn_q.weight"], 20u);  // iq4_nl
  EXPECT_EQ(t["blk.5.attn_v.weight"], 13u);  // q5_K
  EXPECT_EQ(t["blk.0.ffn_down.weight"], 13u);
  EXPECT_EQ(t["blk.1.ffn_down.weight"], 20u);
  o.kv_heads = 2;
  t = types(o);
  EXPECT_EQ(t["blk.5.attn_v.weight"], 20u);
  o.hidden = 192;  // rows of 192: q5_K becomes q5_1
  o.kv_heads = 1;
  t = types(o);
  EXPECT_EQ(t["blk.5.attn_v.weight"], 7u);
  EXPECT_EQ(t["blk.0.ffn_down.weight"], 13u);  // rows of --ffn 512
  EXPECT_EQ(t["blk.0.attn_q.weight"], 20u);

  synth_options k = small("llama", "q4_k_m", "q4km_192.gguf");
  k.hidden = 192;
  k.heads = 3;
  k.kv_heads = 1;
  t = types(k);
  EXPECT_EQ(t["blk.0.attn_q.weight"], 6u);     // q4_K -> q5_0
  EXPECT_EQ(t["blk.0.attn_v.weight"], 6u);
  EXPECT_EQ(t["blk.2.attn_v.weight"], 8u);     // q6_K -> q8_0
  EXPECT_EQ(t["blk.0.ffn_down.weight"], 12u);  // rows of 512 stay q4_K
  EXPECT_EQ(t["output.weight"], 8u);
  k.type = "q5_k_m";
  t = types(k);
  EXPECT_EQ(t["blk.0.attn_q.weight"], 7u);     // q5_K -> q5_1
  EXPECT_EQ(t["blk.0.ffn_down.weight"], 13u);
}

TEST(synth, weights_are_spread_and_norms_are_near_one) {
  synth_options o = small("llama", "f16", "stats.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const auto [mean, stddev] = attn_q_spread(*f, kernels::dtype::f16);
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_GT(stddev, 0.02 * 0.9);
  EXPECT_LT(stddev, 0.08 * 1.1);
  const gguf_tensor* norm = f->find_tensor("blk.1.ffn_norm.weight");
  std::vector<float> nv(256);
  std::memcpy(nv.data(), norm->data, 256 * 4);
  for (float x : nv) EXPECT_NEAR(x, 1.0f, 0.2f);
  std::filesystem::remove(o.out);
}

TEST(synth, is_deterministic_for_a_seed) {
  synth_options a = small("qwen2", "q8_0", "a.gguf"), b = small("qwen2", "q8_0", "b.gguf"), c = small("qwen2", "q8_0", "c.gguf");
  c.seed = 8;
  ASSERT_TRUE(synthesize(a));
  ASSERT_TRUE(synthesize(b));
  ASSERT_TRUE(synthesize(c));
  auto ba = read_all(a.out), bb = read_all(b.out), bc = read_all(c.out);
  EXPECT_EQ(ba, bb);
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_NE(ba, bc);
  for (auto& p : {a.out, b.out, c.out}) std::filesystem::remove(p);
}

TEST(synth, copies_every_tokenizer_key_from_a_vocabulary_file) {
  const auto vocab = std::filesystem::path(STRATA_SHARED_DIR) / "vocab" / "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << "no shared vocabularies";
  synth_options o = small("qwen2", "q4_0", "vocab.gguf");
  o.vocab = vocab.string();
  o.layers = 1;
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  auto v = gguf_file::open(vocab);
  ASSERT_TRUE(f);
  ASSERT_TRUE(v);
  for (const std::string& k : v->keys()) {
    if (k.rfind("tokenizer.", 0) != 0) continue;
    auto mine = f->raw_value(k);
    auto theirs = v->raw_value(k);
    ASSERT_TRUE(mine) << k;
    ASSERT_EQ(mine->size(), theirs->size()) << k;
    EXPECT_EQ(std::memcmp(mine->data(), theirs->data(), mine->size()), 0) << k;
  }
  EXPECT_EQ(f->find_tensor("token_embd.weight")->ne[1], 50257);
  EXPECT_EQ(f->get_int("qwen2.vocab_size"), 50257);
  std::filesystem::remove(o.out);
}

TEST(synth, rejects_bad_options_naming_the_flag) {
  auto message = [](synth_options o) {
    auto r = validate(o);
    return r ? std::string() : r.err().message;
  };
  synth_options o = small("llama", "q8_0", "never.gguf");
  EXPECT_EQ(message(o), "");
  auto with = [&](auto change) {
    synth_options c = o;
    change(c);
    return message(c);
  };
  EXPECT_NE(with([](auto& c) { c.arch = "gpt5"; }).find("--arch"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.type = "q3_k"; }).find("--type"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.layers = 0; }).find("--layers"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.kv_heads = 3; }).find("--kv-heads 3 must divide --heads 4"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.kv_heads = 8; }).find("--kv-heads"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.heads = 3; c.kv_heads = 1; }).find("--heads 3 must divide --hidden 256"), std::string::npos);
  EXPECT_EQ(with([](auto& c) { c.heads = 3; c.kv_heads = 1; c.head_dim = 64; }), "");
  EXPECT_NE(with([](auto& c) { c.ffn = 100; }).find("--ffn (100) must be a multiple of 32"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.vocab.clear(); }).find("--vocab"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.out.clear(); }).find("--out"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.ctx = 0; }).find("--ctx"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.arch = "gemma2"; c.tied = false; }).find("gemma2"), std::string::npos);
  EXPECT_NE(with([](auto& c) { c.head_dim = 1024; }).find("head length"), std::string::npos);
  o.vocab = "/nonexistent/vocab.gguf";
  auto r = synthesize(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("--vocab"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.out));
}

TEST(builtin_vocab, has_the_byte_tokens_merges_and_chatml_specials) {
  const builtin_vocab& v = builtin_vocab::get();
  ASSERT_GE(v.tokens.size(), 256u + 200u + 3u);
  EXPECT_EQ(v.tokens[0], "!");
  EXPECT_EQ(v.tokens[255], "\xC5\x83");  // U+0143: the last of the moved bytes (0xAD)
  EXPECT_GE(v.merges.size(), 200u);
  EXPECT_EQ(v.tokens.size(), 256 + v.merges.size() + 3);
  // Every merge joins two tokens that exist before it, into the token at its id.
  std::set<std::string> known(v.tokens.begin(), v.tokens.begin() + 256);
  for (std::size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    auto space = m.find(' ');
    ASSERT_NE(space, std::string::npos);
    std::string l = m.substr(0, space), r = m.substr(space + 1);
    EXPECT_TRUE(known.count(l)) << m;
    EXPECT_TRUE(known.count(r)) << m;
    EXPECT_EQ(v.tokens[256 + i], l + r);
    known.insert(l + r);
  }
  EXPECT_TRUE(known.count("\xC4\xA0the"));  // " the" in byte-level form
  EXPECT_EQ(v.tokens[v.bos_id], "<|endoftext|>");
  EXPECT_EQ(v.tokens[v.eos_id], "<|im_end|>");
  EXPECT_EQ(v.token_types[v.eos_id], 3);
  EXPECT_NE(v.chat_template.find("<|im_start|>"), std::string::npos);
}

}  // namespace
}  // namespace strata::model
