#pragma once
// Typed hyperparameters of the supported architectures, read from GGUF metadata.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops.hpp"
#include "src/common/error.hpp"
#include "src/model/gguf_file.hpp"

namespace strata::model {

enum class arch { llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, gpt_oss, granitehybrid };

const char* arch_name(arch a);

struct hparams {
  arch architecture = arch::llama;
  std::int32_t n_vocab = 0;
  std::int32_t n_embd = 0;
  std::int32_t n_layer = 0;
  std::int32_t n_ff = 0;
  std::int32_t n_head = 0;
  std::int32_t n_head_kv = 0;
  std::int32_t head_dim = 0;     // key/value length per head
  std::int32_t n_rot = 0;        // rotated dimensions per head
  std::int32_t n_ctx_train = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  // The rotary base and scale of sliding-window layers (gemma3: a local base, no scaling; the
  // others: the same as the global layers').
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;
  bool rope_neox = false;        // rotate (i, i + n_rot/2) instead of adjacent pairs
  bool use_rope = true;          // false: no positional rotation at all (granitehybrid's NoPE)
  /// YaRN scaling (rope.scaling.type yarn): yarn.ext_factor != 0, rope_freq_scale the 1 / factor.
  kernels::yarn_params yarn;
  float norm_eps = 1e-5f;
  // gemma2, gemma3
  std::int32_t sliding_window = 0;   // 0: none
  std::vector<bool> sliding_layers;  // per layer: whether it attends through the window
  float attn_softcap = 0.0f;        // 0: none
  float final_softcap = 0.0f;
  float embed_scale = 1.0f;         // embeddings are multiplied by this (sqrt(n_embd) for gemma)
  float attn_scale = 0.0f;          // 1/sqrt(head_dim)
  // qwen35: Gated DeltaNet (linear attention) layers, with a gated full-attention layer every few
  // layers. The attention layers' query projection also gives a per-value gate (sigmoid).
  bool attn_gated = false;
  std::vector<bool> recurrent_layers;  // per layer: a Gated DeltaNet layer instead of attention
  std::int32_t ssm_conv_kernel = 0;    // length of the short causal convolution
  std::int32_t ssm_state = 0;          // key (and value) length per delta-rule head
  std::int32_t ssm_k_heads = 0;        // query/key heads (ssm.group_count)
  std::int32_t ssm_v_heads = 0;        // value heads (ssm.time_step_rank); a multiple of ssm_k_heads
  std::int32_t ssm_inner = 0;          // ssm_v_heads * ssm_state
  // granitehybrid (Granite 4.0-H): Mamba-2 layers where head_count_kv is 0, attention (no rotary
  // embedding by default) elsewhere, a SwiGLU FFN in every layer. The ssm_ fields above then mean:
  // ssm_state the state length per channel (d_state), ssm_k_heads the B/C groups (n_group),
  // ssm_v_heads the scan's heads, ssm_inner their channels (d_inner, heads of ssm_head_dim()), so
  // that ssm_conv_dim() is again the convolution's channels (x, B, C). Granite's multipliers:
  // residual_scale on each block's output before its residual add, logit_scale dividing the logits
  // (embed_scale and attn_scale above take embedding_scale and attention.scale).
  float residual_scale = 1.0f;
  float logit_scale = 1.0f;
  // Mixture of experts (qwen3moe, gpt-oss): a router picks n_expert_used of n_expert SwiGLU
  // experts per token, each of n_ff_exp hidden values, and sums their outputs weighted.
  std::int32_t n_expert = 0;           // 0: a dense feed-forward block
  std::int32_t n_expert_used = 0;
  std::int32_t n_ff_exp = 0;
  /// How the router's logits become the selected experts' weights: softmax over all experts, then
  /// the top k renormalized to sum 1 (qwen3moe); or the top k logits, then softmax over them
  /// (gpt-oss). The two give the same weights; they differ in which values are compared.
  bool router_softmax_after_topk = false;
  /// gpt-oss's clamped SwiGLU: x = min(gate, limit), y = clamp(up, -limit, limit),
  /// out = x * sigmoid(alpha * x) * (y + 1).
  bool swiglu_oai = false;
  static constexpr float k_swiglu_oai_alpha = 1.702f;
  static constexpr float k_swiglu_oai_limit = 7.0f;

  /// The delta rule's key width (query and key rows), and the convolution's channels: q, k, v.
  std::int32_t ssm_key_dim() const { return ssm_k_heads * ssm_state; }
  std::int32_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_inner; }
  /// Whether recurrent layers are Mamba-2 (granitehybrid) rather than Gated DeltaNet (qwen35).
  bool mamba2() const { return architecture == arch::granitehybrid; }
  /// Channels per Mamba-2 head (d_inner / heads); the delta rule's heads are ssm_state long.
  std::int32_t ssm_head_dim() const { return mamba2() ? ssm_inner / ssm_v_heads : ssm_state; }
  /// Whether layer il is a recurrent (Gated DeltaNet or Mamba-2) layer.
  bool recurrent(int il) const {
    const auto i = static_cast<std::size_t>(il);
    return il >= 0 && i < recurrent_layers.size() && recurrent_layers[i];
  }
  /// Whether any layer keeps a recurrent state.
  bool has_recurrent() const {
    for (bool r : recurrent_layers)
      if (r) return true;
    return false;
  }

  /// Whether the feed-forward blocks are mixtures of experts.
  bool moe() const { return n_expert > 0; }

  std::int32_t q_dim() const { return n_head * head_dim; }
  std::int32_t kv_dim() const { return n_head_kv * head_dim; }
  /// Whether layer il attends through a sliding window.
  bool sliding(int il) const {
    const auto i = static_cast<std::size_t>(il);
    return sliding_window > 0 && il >= 0 && i < sliding_layers.size() && sliding_layers[i];
  }
  /// Whether layer il keeps per-sequence state that cannot be cut back to an earlier position (a
  /// recurrent layer's state, a sliding-window layer's window): such layers write no KV pages of
  /// the shared blocks, and a sequence resumes only from a frozen boundary snapshot of them.
  bool keeps_state(int il) const { return recurrent(il) || sliding(il); }
  /// Whether any layer keeps such state.
  bool has_state() const {
    for (int il = 0; il < n_layer; ++il)
      if (keeps_state(il)) return true;
    return false;
  }
  /// The rotary base and scale of layer il.
  float rope_base(int il) const { return sliding(il) ? rope_freq_base_swa : rope_freq_base; }
  float rope_scale(int il) const { return sliding(il) ? rope_freq_scale_swa : rope_freq_scale; }

  /// Reads and checks the metadata; a missing or inconsistent key is an error naming it.
  static result<hparams> from_gguf(const gguf_file& f);
};

}  // namespace strata::model
