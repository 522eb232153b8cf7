#pragma once
// Views of a model's tensors inside the mapped GGUF, checked against the hyperparameters.

#include <cstdint>
#include <vector>

#include "kernels/types.hpp"
#include "src/common/error.hpp"
#include "src/model/gguf_file.hpp"
#include "src/model/hparams.hpp"

namespace strata::model {

/// A matrix of `rows` rows of `cols` elements (GGUF: ne[0] = cols), or empty.
struct tensor_view {
  kernels::dtype type = kernels::dtype::f32;
  const void* data = nullptr;
  std::int64_t cols = 0;
  std::int64_t rows = 0;
  /// The matrix repacked for the CPU's kernel (kernels::pack_x16: its rows / 16 groups, then the
  /// rows % 16 left over in the GGUF layout), or null: matmul and embedding lookups read
  /// it from here instead of `data`.
  const void* packed = nullptr;
  /// How many matrices of rows / experts rows each are stacked in it (the experts' 3-D tensors),
  /// 1 for a plain matrix. Each expert's matrix is packed on its own, in place of its GGUF bytes.
  std::int64_t experts = 1;
  explicit operator bool() const { return data != nullptr; }
  /// The data as f32 (norms and biases are always stored as f32).
  const float* f32() const { return static_cast<const float*>(data); }
};

/// One layer's tensors; those an architecture lacks stay empty (phi3 has wqkv and gate_up instead
/// of wq/wk/wv and gate/up; qwen2 adds the biases, qwen3 q_norm/k_norm, gemma2 the post norms,
/// gemma3 both the norms and the post norms). qwen35's attention layers have a wq of twice the
/// query rows (each head's query, then its output gate); its recurrent layers have wqkv (the
/// convolution's q, k, v channels), attn_gate (the output gate z) and the ssm_ tensors instead,
/// and its pre-FFN norm (post_attention_norm in the file) is ffn_norm here. Mixture-of-experts
/// layers have router (ffn_gate_inp: n_expert rows) and the experts' stacked matrices instead of
/// gate, up and down: gate_exps and up_exps hold n_expert matrices of n_ff_exp rows one after the
/// other (rows = n_expert * n_ff_exp), down_exps n_expert matrices of n_embd rows; their biases
/// (gpt-oss) hold one row per expert. gpt-oss's pre-FFN norm (post_attention_norm in the file) is
/// ffn_norm here.
struct layer_weights {
  tensor_view attn_norm, wq, wk, wv, wqkv, wo, bq, bk, bv, q_norm, k_norm, post_attn_norm;
  tensor_view ffn_norm, gate, up, gate_up, down, post_ffn_norm;
  tensor_view router, router_b, gate_exps, up_exps, down_exps, gate_exps_b, up_exps_b, down_exps_b;
  /// gpt-oss: the attention output's bias, and each query head's sink (a logit every row's softmax
  /// also counts, that adds no value).
  tensor_view bo, attn_sinks;
  tensor_view attn_gate, ssm_conv1d, ssm_dt, ssm_a, ssm_beta, ssm_alpha, ssm_norm, ssm_out;
  /// granitehybrid's Mamba-2 layers: ssm_in gives each row's z, x|B|C and dt; the convolution's
  /// bias, and the skip weight D per head (ssm_a holds A = -exp(A_log) per head, ssm_norm the
  /// grouped norm's d_inner weights, ssm_dt the step's bias).
  tensor_view ssm_in, ssm_conv1d_b, ssm_d;
  /// Per-frequency divisors of the rotary angles (n_rot / 2 values, Llama 3.1 style), shared by
  /// every layer; empty when the file has none.
  tensor_view rope_freqs;
};

struct model_weights {
  tensor_view token_embd, output_norm, output;  // output may be token_embd (tied)
  std::vector<layer_weights> layers;
  /// Bytes of weights one decoded token reads (every matrix once, embeddings one row).
  std::uint64_t bytes_per_token = 0;

  static result<model_weights> bind(const gguf_file& f, const hparams& h);
};

}  // namespace strata::model
