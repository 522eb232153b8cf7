// qwen35 (Gated DeltaNet hybrid): what `strata synth` writes is what llama.cpp's converter writes
// and loads (tensor names, shapes, types, ssm.* keys), and hparams reads which layers are
// recurrent from the keys llama.cpp reads.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "src/model/gguf_file.hpp"
#include "src/model/gguf_rewrite_testing.hpp"
#include "src/model/gguf_writer.hpp"
#include "src/model/hparams.hpp"
#include "src/model/synth.hpp"
#include "src/model/weights.hpp"

namespace strata::model {
namespace {

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("strata_qwen35_" + std::to_string(::getpid()) + "_" + name);
}

synth_options qwen35_options(const std::string& file) {
  synth_options o;
  o.arch = "qwen35";
  o.layers = 8;
  o.hidden = 256;
  o.heads = 4;
  o.kv_heads = 2;
  o.head_dim = 64;
  o.ffn = 512;
  o.ssm_state = 32;
  o.ssm_k_heads = 2;
  o.ssm_v_heads = 4;
  o.vocab = "builtin";
  o.seed = 5;
  o.out = temp_path(file);
  return o;
}

TEST(qwen35, synth_writes_the_delta_net_layout_llama_cpp_reads) {
  synth_options o = qwen35_options("layout.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f) << f.err().message;
  EXPECT_EQ(f->get_int("qwen35.ssm.conv_kernel"), 4);
  EXPECT_EQ(f->get_int("qwen35.ssm.state_size"), 32);
  EXPECT_EQ(f->get_int("qwen35.ssm.group_count"), 2);
  EXPECT_EQ(f->get_int("qwen35.ssm.time_step_rank"), 4);
  EXPECT_EQ(f->get_int("qwen35.ssm.inner_size"), 128);
  EXPECT_EQ(f->get_int("qwen35.full_attention_interval"), 4);
  EXPECT_EQ(f->get_int("qwen35.rope.dimension_count"), 16);  // a quarter of the head
  EXPECT_EQ(f->get_int_array("qwen35.rope.dimension_sections"), (std::vector<std::int64_t>{11, 11, 10, 0}));
  // A recurrent layer: q, k, v channels (2 x 64 + 128), the gate, the f32 convolution taps.
  const gguf_tensor* qkv = f->find_tensor("blk.0.attn_qkv.weight");
  ASSERT_TRUE(qkv);
  EXPECT_EQ(qkv->ne[1], 256);
  const gguf_tensor* conv = f->find_tensor("blk.0.ssm_conv1d.weight");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->ne[0], 4);
  EXPECT_EQ(conv->ne[1], 256);
  EXPECT_EQ(conv->type, 0u);
  for (const char* name : {"attn_gate.weight", "ssm_dt.bias", "ssm_a", "ssm_beta.weight", "ssm_alpha.weight", "ssm_norm.weight",
                           "ssm_out.weight", "post_attention_norm.weight"})
    EXPECT_TRUE(f->find_tensor(std::string("blk.2.") + name)) << name;
  EXPECT_FALSE(f->find_tensor("blk.0.attn_q.weight"));
  // Layer 3 attends: a query of twice the rows (query and gate per head), Q/K norms.
  const gguf_tensor* q = f->find_tensor("blk.3.attn_q.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->ne[1], 2 * 4 * 64);
  EXPECT_TRUE(f->find_tensor("blk.3.attn_q_norm.weight"));
  EXPECT_FALSE(f->find_tensor("blk.3.ssm_a"));
  // The decay rates are negative, as -exp(A_log).
  const gguf_tensor* a = f->find_tensor("blk.1.ssm_a");
  float rates[4];
  std::memcpy(rates, a->data, sizeof rates);
  for (float r : rates) EXPECT_LT(r, 0.0f);

  auto h = hparams::from_gguf(*f);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->architecture, arch::qwen35);
  EXPECT_TRUE(h->attn_gated);
  EXPECT_EQ(h->n_rot, 16);
  EXPECT_EQ(h->ssm_conv_dim(), 256);
  for (int il = 0; il < 8; ++il) EXPECT_EQ(h->recurrent(il), il % 4 != 3) << il;
  auto w = model_weights::bind(*f, *h);
  ASSERT_TRUE(w) << w.err().message;
  EXPECT_TRUE(w->layers[0].ssm_conv1d);
  EXPECT_TRUE(w->layers[3].wq);
  EXPECT_TRUE(w->layers[3].ffn_norm);  // post_attention_norm: the FFN's norm
  std::filesystem::remove(o.out);
}

using testing::rewrite;

TEST(qwen35, recurrent_layers_come_from_the_per_layer_array_when_there_is_one) {
  synth_options o = qwen35_options("array.gguf");
  o.layers = 4;
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const auto path = temp_path("array2.gguf");
  gguf_file g = rewrite(*f, "qwen35.full_attention_interval", path, [](gguf_writer& w) {
    const bool layers[] = {false, true, false, true};
    w.add_bool_array("qwen35.attention.recurrent_layers", layers);
  });
  auto h = hparams::from_gguf(g);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->recurrent_layers, (std::vector<bool>{false, true, false, true}));
  std::filesystem::remove(o.out);
  std::filesystem::remove(path);
}

TEST(qwen35, multi_token_prediction_blocks_are_not_layers_of_the_pass) {
  synth_options o = qwen35_options("nextn.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const auto path = temp_path("nextn2.gguf");
  gguf_file g = rewrite(*f, "", path, [](gguf_writer& w) { w.add_u32("qwen35.nextn_predict_layers", 1); });
  auto h = hparams::from_gguf(g);
  ASSERT_TRUE(h) << h.err().message;
  EXPECT_EQ(h->n_layer, 7);
  EXPECT_EQ(h->recurrent_layers.size(), 7u);
  std::filesystem::remove(o.out);
  std::filesystem::remove(path);
}

TEST(qwen35, hparams_name_a_missing_delta_net_key) {
  synth_options o = qwen35_options("missing.gguf");
  ASSERT_TRUE(synthesize(o));
  auto f = gguf_file::open(o.out);
  ASSERT_TRUE(f);
  const auto path = temp_path("missing2.gguf");
  gguf_file g = rewrite(*f, "qwen35.ssm.state_size", path, [](gguf_writer&) {});
  auto h = hparams::from_gguf(g);
  ASSERT_FALSE(h);
  EXPECT_NE(h.err().message.find("qwen35.ssm.state_size"), std::string::npos) << h.err().message;
  std::filesystem::remove(o.out);
  std::filesystem::remove(path);
}

TEST(qwen35, synth_refuses_types_and_shapes_its_converter_never_writes) {
  synth_options o = qwen35_options("never.gguf");
  o.type = "q4_k_m";
  EXPECT_FALSE(validate(o));
  o.type = "f16";
  o.head_dim = 16;  // the rotary sections span 32 values
  EXPECT_FALSE(validate(o));
  o.head_dim = 64;
  o.ssm_v_heads = 3;  // not a multiple of the 2 key heads
  EXPECT_FALSE(validate(o));
}

}  // namespace
}  // namespace strata::model
