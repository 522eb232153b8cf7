// The mixture-of-experts architectures as strata synth writes them and the loader reads them:
// qwen3moe and gpt-oss metadata, stacked expert tensors, and what a decoded token reads.

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"
#include "src/model/synth.hpp"
#include "src/model/weights.hpp"

namespace strata::model {
namespace {

/// A tiny model of `arch` written to a temporary file, removed at the end of the test.
struct synth_file {
  synth_options o;
  explicit synth_file(const std::string& arch, const std::string& type = "f32") {
    o.arch = arch;
    o.layers = 4;
    o.hidden = 128;
    o.heads = 4;
    o.kv_heads = 2;
    o.head_dim = 32;
    o.ffn = 256;
    o.experts = 8;
    o.experts_used = 2;
    o.expert_ffn = 64;
    o.vocab = "builtin";
    o.type = type;
    o.out = std::filesystem::temp_directory_path() / ("strata_moe_" + std::to_string(::getpid()) + "_" + arch + "_" + type + ".gguf");
  }
  ~synth_file() { std::filesystem::remove(o.out); }
};

TEST(moe_model, qwen3moe_routes_eight_experts_with_a_softmax_over_all_of_them) {
  synth_file s("qwen3moe");
  ASSERT_TRUE(synthesize(s.o));
  auto f = gguf_file::open(s.o.out);
  ASSERT_TRUE(f) << f.err().message;
  const gguf_tensor* gate = f->find_tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_TRUE(gate);
  EXPECT_EQ(gate->ne[0], 128);
  EXPECT_EQ(gate->ne[1], 64);
  EXPECT_EQ(gate->ne[2], 8);
  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->architecture, arch::qwen3moe);
  EXPECT_EQ(h->n_expert, 8);
  EXPECT_EQ(h->n_expert_used, 2);
  EXPECT_EQ(h->n_ff_exp, 64);
  EXPECT_FALSE(h->router_softmax_after_topk);
  EXPECT_FALSE(h->swiglu_oai);
  EXPECT_EQ(h->yarn.ext_factor, 0.0f);
  auto w = model_weights::bind(*f, *h);
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_EQ(w->layers[0].gate_exps.rows, 8 * 64);
  EXPECT_EQ(w->layers[0].down_exps.rows, 8 * 128);
  EXPECT_FALSE(w->layers[0].gate);
}

TEST(moe_model, a_decoded_token_reads_only_its_share_of_the_experts) {
  synth_file s("qwen3moe");
  ASSERT_TRUE(synthesize(s.o));
  auto f = gguf_file::open(s.o.out);
  ASSERT_TRUE(f);
  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h);
  auto w = model_weights::bind(*f, *h);
  ASSERT_TRUE(w);
  std::uint64_t experts = 0, all = 0;
  for (const gguf_tensor& t : f->tensors()) {
    all += t.n_bytes;
    if (t.name.find("_exps.") != std::string::npos) experts += t.n_bytes;
  }
  // Every tensor but the embedding table (the output is its own, untied), and two of eight experts.
  const std::uint64_t embd = f->find_tensor("token_embd.weight")->n_bytes;
  EXPECT_EQ(w->bytes_per_token, all - embd - experts + experts / 8 * 2);
}

TEST(moe_model, gpt_oss_slides_every_other_layer_with_yarn_sinks_and_biases) {
  synth_file s("gpt-oss");
  ASSERT_TRUE(synthesize(s.o));
  auto f = gguf_file::open(s.o.out);
  ASSERT_TRUE(f) << f.err().message;
  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->architecture, arch::gpt_oss);
  EXPECT_TRUE(h->router_softmax_after_topk);
  EXPECT_TRUE(h->swiglu_oai);
  EXPECT_EQ(h->sliding_window, 128);
  EXPECT_EQ(h->sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_FLOAT_EQ(h->rope_freq_base, 150000.0f);
  EXPECT_FLOAT_EQ(h->rope_freq_scale, 1.0f / 32);
  EXPECT_FLOAT_EQ(h->rope_scale(0), 1.0f / 32);  // the sliding layers are scaled alike
  EXPECT_EQ(h->yarn.ext_factor, 1.0f);
  EXPECT_EQ(h->yarn.n_ctx_orig, 4096);
  // llama.cpp's attention factor cancels the mscale it derives: the angles scale by 1 + 0.1 ln 32.
  EXPECT_NEAR(h->yarn.attn_factor, 1.0f, 1e-6);
  auto w = model_weights::bind(*f, *h);
  ASSERT_TRUE(w) << w.err().message;
  const layer_weights& L = w->layers[1];
  EXPECT_TRUE(L.attn_sinks && L.bo && L.bq && L.router_b && L.gate_exps_b && L.up_exps_b && L.down_exps_b);
  EXPECT_EQ(L.attn_sinks.cols, 4);
  EXPECT_EQ(L.down_exps_b.rows, 8);
  EXPECT_TRUE(L.ffn_norm);
}

TEST(moe_model, mxfp4_moe_writes_the_experts_in_mxfp4_and_the_rest_in_q8_0) {
  synth_file s("gpt-oss", "mxfp4_moe");
  ASSERT_TRUE(synthesize(s.o));
  auto f = gguf_file::open(s.o.out);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up_exps.weight")->type, 39u);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, 8u);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight")->type, 0u);  // the router stays f32
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up_exps.bias")->type, 0u);
  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h);
  EXPECT_TRUE(model_weights::bind(*f, *h));
}

}  // namespace
}  // namespace strata::model
