// granitehybrid (Granite 4.0-H, a Mamba-2 hybrid): what `strata synth` writes is what llama.cpp's
// converter writes (tensor names, shapes, types, per-layer head_count_kv, ssm.* keys, Granite's
// multipliers), and hparams reads which layers are Mamba-2 and the multipliers as llama.cpp does.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "src/model/gguf_file.hpp"
#include "src/model/gguf_rewrite_testing.hpp"
#include "src/model/hparams.hpp"
#include "src/model/synth.hpp"
#include "src/model/weights.hpp"

namespace strata::model {
namespace {

using testing::rewrite;

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("strata_granite_" + std::to_string(::getpid()) + "_" + name);
}

/// 8 layers, attention every fourth; Mamba-2 with d_inner 256, 4 heads of 64, 2 groups of state 16.
synth_options granite_options(const std::string& file) {
  synth_options o;
  o.arch = "granitehybrid";
  o.layers = 8;
  o.hidden = 128;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 256;
  o.ssm_state = 16;
  o.ssm_k_heads = 2;
  o.ssm_v_heads = 4;
  o.vocab = "builtin";
  o.seed = 7;
  o.out = temp_path(file);
  return o;
}

TEST(granitehybrid, synth_writes_the_mamba2_layout_llama_cpp_reads) {
  synth_options o = granite_options("layout.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->get_int_array("granitehybrid.attention.head_count_kv"), (std::vector<std::int64_t>{0, 0, 0, 2, 0, 0, 0, 2}));
  EXPECT_EQ(f->get_int("granitehybrid.ssm.inner_size"), 256);
  EXPECT_EQ(f->get_int("granitehybrid.ssm.time_step_rank"), 4);
  EXPECT_EQ(f->get_int("granitehybrid.ssm.group_count"), 2);
  EXPECT_EQ(f->get_bool("granitehybrid.rope.scaling.finetuned"), false);
  // Layer 0 is Mamba-2: ssm_in gives z (256), x|B|C (256 + 2 x 2 x 16) and dt (4).
  const gguf_tensor* in = f->find_tensor("blk.0.ssm_in.weight");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->ne[0], 128);
  EXPECT_EQ(in->ne[1], 256 + 320 + 4);
  const gguf_tensor* conv = f->find_tensor("blk.0.ssm_conv1d.weight");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->ne[0], 4);
  EXPECT_EQ(conv->ne[1], 320);
  EXPECT_EQ(conv->type, 0u);
  const gguf_tensor* norm = f->find_tensor("blk.0.ssm_norm.weight");
  ASSERT_TRUE(norm);
  EXPECT_EQ(norm->ne[0], 128);  // d_inner / groups, per group
  EXPECT_EQ(norm->ne[1], 2);
  const gguf_tensor* a = f->find_tensor("blk.1.ssm_a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->ne[0], 1);
  EXPECT_EQ(a->ne[1], 4);
  float rates[4];
  std::memcpy(rates, a->data, sizeof rates);
  for (float r : rates) EXPECT_LT(r, 0.0f);  // -exp(A_log)
  for (const char* name : {"ssm_conv1d.bias", "ssm_dt.bias", "ssm_d", "ssm_out.weight", "ffn_norm.weight", "ffn_gate.weight"})
    EXPECT_TRUE(f->find_tensor(std::string("blk.2.") + name)) << name;
  EXPECT_FALSE(f->find_tensor("blk.0.attn_q.weight"));
  EXPECT_TRUE(f->find_tensor("blk.3.attn_q.weight"));
  EXPECT_FALSE(f->find_tensor("blk.3.ssm_in.weight"));

  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->architecture, arch::granitehybrid);
  EXPECT_TRUE(h->mamba2());
  for (int il = 0; il < 8; ++il) EXPECT_EQ(h->recurrent(il), il % 4 != 3) << il;
  EXPECT_EQ(h->n_head_kv, 2);
  EXPECT_EQ(h->ssm_head_dim(), 64);
  EXPECT_EQ(h->ssm_conv_dim(), 320);
  EXPECT_FALSE(h->use_rope);
  EXPECT_FLOAT_EQ(h->attn_scale, 1.0f / 32.0f);  // 1 / head length, not its square root
  EXPECT_FLOAT_EQ(h->embed_scale, 4.0f);
  EXPECT_FLOAT_EQ(h->residual_scale, 0.5f);
  EXPECT_FLOAT_EQ(h->logit_scale, 0.5f);
  auto w = model_weights::bind(*f, *h);
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_TRUE(w->layers[0].ssm_in);
  EXPECT_TRUE(w->layers[0].ssm_conv1d_b);
  EXPECT_TRUE(w->layers[3].wq);
  EXPECT_TRUE(w->layers[3].ffn_norm);
  std::filesystem::remove(o.out);
}

TEST(granitehybrid, the_mixture_of_experts_variant_is_refused_naming_the_key) {
  synth_options o = granite_options("experts.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const auto path = temp_path("experts2.gguf");
  gguf_file g = rewrite(*f, "", path, [](gguf_writer& w) { w.add_u32("granitehybrid.expert_count", 64); });
  auto h = hparams::from_gguf(g);
  ASSERT_FALSE(h);
  EXPECT_NE(h.err().message.find("granitehybrid.expert_count"), std::string::npos) << h.err().message;
  std::filesystem::remove(o.out);
  std::filesystem::remove(path);
}

TEST(granitehybrid, attention_layers_with_different_key_value_head_counts_are_refused) {
  synth_options o = granite_options("kvheads.gguf");
  o.layers = 4;
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const auto path = temp_path("kvheads2.gguf");
  gguf_file g = rewrite(*f, "granitehybrid.attention.head_count_kv", path, [](gguf_writer& w) {
    const std::int32_t heads[] = {0, 2, 0, 4};
    w.add_i32_array("granitehybrid.attention.head_count_kv", heads);
  });
  auto h = hparams::from_gguf(g);
  ASSERT_FALSE(h);
  EXPECT_NE(h.err().message.find("head_count_kv"), std::string::npos) << h.err().message;
  std::filesystem::remove(o.out);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace strata::model
