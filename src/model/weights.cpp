#include "src/model/weights.hpp"

#include <string>

namespace strata::model {
namespace {

class binder {
 public:
  explicit binder(const gguf_file& f) : f_(f) {}

  /// A matrix with `cols` x `rows`; an f32-only tensor when f32_only. Missing and optional: empty.
  result<tensor_view> get(const std::string& name, std::int64_t cols, std::int64_t rows, bool optional, bool f32_only = false) {
    return bind(name, cols, rows, 1, 1, optional, f32_only);
  }

  /// A stack of `experts` matrices of `cols` x `rows` (GGUF: ne = [cols, rows, experts]), viewed
  /// as one matrix of experts * rows rows. A decoded token reads n_used of them: that share of
  /// its bytes counts toward bytes_per_token.
  result<tensor_view> get_experts(const std::string& name, std::int64_t cols, std::int64_t rows, std::int64_t experts, std::int64_t n_used,
                                  bool f32_only = false) {
    return bind(name, cols, rows, experts, n_used, false, f32_only);
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  result<tensor_view> bind(const std::string& name, std::int64_t cols, std::int64_t rows, std::int64_t experts, std::int64_t n_used,
                           bool optional, bool f32_only) {
    const gguf_tensor* t = f_.find_tensor(name);
    if (!t) {
      if (optional) return tensor_view{};
      return fail(errc::corrupt_data, "tensor '", name, "' is missing");
    }
    auto dt = kernels::dtype_from_id(t->type);
    if (!dt) return fail(errc::unsupported, "tensor '", name, "' has unsupported type ", kernels::ggml_type_name(t->type));
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != experts || t->ne[3] != 1) {
      if (experts == 1)
        return fail(errc::corrupt_data, "tensor '", name, "' has shape [", t->ne[0], ", ", t->ne[1], "], expected [", cols, ", ", rows, "]");
      return fail(errc::corrupt_data, "tensor '", name, "' has shape [", t->ne[0], ", ", t->ne[1], ", ", t->ne[2], "], expected [", cols,
                  ", ", rows, ", ", experts, "]");
    }
    if (f32_only && *dt != kernels::dtype::f32)
      return fail(errc::unsupported, "tensor '", name, "' must be f32, found ", kernels::dtype_name(*dt));
    bytes_ += t->n_bytes / static_cast<std::uint64_t>(experts) * static_cast<std::uint64_t>(n_used);
    return tensor_view{*dt, t->data, cols, rows * experts, nullptr, experts};
  }

  const gguf_file& f_;
  std::uint64_t bytes_ = 0;
};

#define STRATA_TRY_ASSIGN(lhs, expr)      \
  do {                                    \
    auto _r = (expr);                     \
    if (!_r) return std::move(_r).err();  \
    lhs = *_r;                            \
  } while (0)

/// A qwen35 layer's mixer: a Gated DeltaNet layer's projections, convolution and gates, or a
/// gated attention layer's projections (wq gives each head's query and its gate).
result<void> bind_qwen35_mixer(binder& b, const hparams& h, int il, const std::string& p, layer_weights& L) {
  const std::int64_t d = h.n_embd;
  if (!h.recurrent(il)) {
    STRATA_TRY_ASSIGN(L.wq, b.get(p + "attn_q.weight", d, 2 * h.q_dim(), false));
    STRATA_TRY_ASSIGN(L.wk, b.get(p + "attn_k.weight", d, h.kv_dim(), false));
    STRATA_TRY_ASSIGN(L.wv, b.get(p + "attn_v.weight", d, h.kv_dim(), false));
    STRATA_TRY_ASSIGN(L.wo, b.get(p + "attn_output.weight", h.q_dim(), d, false));
    STRATA_TRY_ASSIGN(L.q_norm, b.get(p + "attn_q_norm.weight", h.head_dim, 1, false, true));
    STRATA_TRY_ASSIGN(L.k_norm, b.get(p + "attn_k_norm.weight", h.head_dim, 1, false, true));
    return {};
  }
  const std::int64_t hv = h.ssm_v_heads;
  STRATA_TRY_ASSIGN(L.wqkv, b.get(p + "attn_qkv.weight", d, h.ssm_conv_dim(), false));
  STRATA_TRY_ASSIGN(L.attn_gate, b.get(p + "attn_gate.weight", d, h.ssm_inner, false));
  STRATA_TRY_ASSIGN(L.ssm_conv1d, b.get(p + "ssm_conv1d.weight", h.ssm_conv_kernel, h.ssm_conv_dim(), false, true));
  STRATA_TRY_ASSIGN(L.ssm_dt, b.get(p + "ssm_dt.bias", hv, 1, false, true));
  STRATA_TRY_ASSIGN(L.ssm_a, b.get(p + "ssm_a", hv, 1, false, true));
  STRATA_TRY_ASSIGN(L.ssm_beta, b.get(p + "ssm_beta.weight", d, hv, false));
  STRATA_TRY_ASSIGN(L.ssm_alpha, b.get(p + "ssm_alpha.weight", d, hv, false));
  STRATA_TRY_ASSIGN(L.ssm_norm, b.get(p + "ssm_norm.weight", h.ssm_state, 1, false, true));
  STRATA_TRY_ASSIGN(L.ssm_out, b.get(p + "ssm_out.weight", h.ssm_inner, d, false));
  return {};
}

/// A granitehybrid layer's mixer: a Mamba-2 layer's projections, convolution and scan weights, or
/// attention's projections (biases optional, as llama.cpp reads them).
result<void> bind_granite_mixer(binder& b, const hparams& h, int il, const std::string& p, layer_weights& L) {
  const std::int64_t d = h.n_embd;
  if (!h.recurrent(il)) {
    STRATA_TRY_ASSIGN(L.wq, b.get(p + "attn_q.weight", d, h.q_dim(), false));
    STRATA_TRY_ASSIGN(L.wk, b.get(p + "attn_k.weight", d, h.kv_dim(), false));
    STRATA_TRY_ASSIGN(L.wv, b.get(p + "attn_v.weight", d, h.kv_dim(), false));
    STRATA_TRY_ASSIGN(L.wo, b.get(p + "attn_output.weight", h.q_dim(), d, false));
    STRATA_TRY_ASSIGN(L.bq, b.get(p + "attn_q.bias", h.q_dim(), 1, true, true));
    STRATA_TRY_ASSIGN(L.bk, b.get(p + "attn_k.bias", h.kv_dim(), 1, true, true));
    STRATA_TRY_ASSIGN(L.bv, b.get(p + "attn_v.bias", h.kv_dim(), 1, true, true));
    STRATA_TRY_ASSIGN(L.bo, b.get(p + "attn_output.bias", d, 1, true, true));
    return {};
  }
  const std::int64_t nh = h.ssm_v_heads, in_proj = 2 * static_cast<std::int64_t>(h.ssm_inner) + 2 * h.ssm_key_dim() + nh;
  STRATA_TRY_ASSIGN(L.ssm_in, b.get(p + "ssm_in.weight", d, in_proj, false));
  STRATA_TRY_ASSIGN(L.ssm_conv1d, b.get(p + "ssm_conv1d.weight", h.ssm_conv_kernel, h.ssm_conv_dim(), false, true));
  STRATA_TRY_ASSIGN(L.ssm_conv1d_b, b.get(p + "ssm_conv1d.bias", h.ssm_conv_dim(), 1, true, true));
  STRATA_TRY_ASSIGN(L.ssm_dt, b.get(p + "ssm_dt.bias", nh, 1, false, true));
  STRATA_TRY_ASSIGN(L.ssm_a, b.get(p + "ssm_a", 1, nh, false, true));
  STRATA_TRY_ASSIGN(L.ssm_d, b.get(p + "ssm_d", 1, nh, false, true));
  STRATA_TRY_ASSIGN(L.ssm_norm, b.get(p + "ssm_norm.weight", h.ssm_inner / h.ssm_k_heads, h.ssm_k_heads, false, true));
  STRATA_TRY_ASSIGN(L.ssm_out, b.get(p + "ssm_out.weight", h.ssm_inner, d, false));
  return {};
}

/// A mixture-of-experts feed-forward block: the router and the experts' stacked matrices.
result<void> bind_experts(binder& b, const hparams& h, const std::string& p, layer_weights& L) {
  const std::int64_t d = h.n_embd, ff = h.n_ff_exp, ne = h.n_expert, nu = h.n_expert_used;
  STRATA_TRY_ASSIGN(L.router, b.get(p + "ffn_gate_inp.weight", d, ne, false));
  STRATA_TRY_ASSIGN(L.gate_exps, b.get_experts(p + "ffn_gate_exps.weight", d, ff, ne, nu));
  STRATA_TRY_ASSIGN(L.up_exps, b.get_experts(p + "ffn_up_exps.weight", d, ff, ne, nu));
  STRATA_TRY_ASSIGN(L.down_exps, b.get_experts(p + "ffn_down_exps.weight", ff, d, ne, nu));
  if (h.architecture == arch::gpt_oss) {
    STRATA_TRY_ASSIGN(L.router_b, b.get(p + "ffn_gate_inp.bias", ne, 1, false, true));
    STRATA_TRY_ASSIGN(L.gate_exps_b, b.get(p + "ffn_gate_exps.bias", ff, ne, false, true));
    STRATA_TRY_ASSIGN(L.up_exps_b, b.get(p + "ffn_up_exps.bias", ff, ne, false, true));
    STRATA_TRY_ASSIGN(L.down_exps_b, b.get(p + "ffn_down_exps.bias", d, ne, false, true));
  }
  if (L.gate_exps.type != L.up_exps.type)
    return fail(errc::unsupported, "tensors '", p, "ffn_gate_exps.weight' and '", p, "ffn_up_exps.weight' have different types");
  return {};
}

}  // namespace

result<model_weights> model_weights::bind(const gguf_file& f, const hparams& h) {
  model_weights w;
  binder b(f);
  const std::int64_t d = h.n_embd, qd = h.q_dim(), kvd = h.kv_dim(), ff = h.n_ff;
  STRATA_TRY_ASSIGN(w.token_embd, b.get("token_embd.weight", d, h.n_vocab, false));
  std::uint64_t embd_bytes = b.bytes();
  STRATA_TRY_ASSIGN(w.output_norm, b.get("output_norm.weight", d, 1, false, true));
  STRATA_TRY_ASSIGN(w.output, b.get("output.weight", d, h.n_vocab, true));
  if (!w.output) w.output = w.token_embd;
  tensor_view rope_freqs;
  STRATA_TRY_ASSIGN(rope_freqs, b.get("rope_freqs.weight", h.n_rot / 2, 1, true, true));
  const bool gemma = h.architecture == arch::gemma2 || h.architecture == arch::gemma3;
  const bool phi = h.architecture == arch::phi3;
  for (int il = 0; il < h.n_layer; ++il) {
    layer_weights L;
    std::string p = "blk." + std::to_string(il) + ".";
    STRATA_TRY_ASSIGN(L.attn_norm, b.get(p + "attn_norm.weight", d, 1, false, true));
    if (h.architecture == arch::qwen35 || h.architecture == arch::granitehybrid) {
      const bool granite = h.architecture == arch::granitehybrid;
      if (auto r = granite ? bind_granite_mixer(b, h, il, p, L) : bind_qwen35_mixer(b, h, il, p, L); !r) return std::move(r).err();
      STRATA_TRY_ASSIGN(L.ffn_norm, b.get(p + (granite ? "ffn_norm.weight" : "post_attention_norm.weight"), d, 1, false, true));
      STRATA_TRY_ASSIGN(L.gate, b.get(p + "ffn_gate.weight", d, ff, false));
      STRATA_TRY_ASSIGN(L.up, b.get(p + "ffn_up.weight", d, ff, false));
      STRATA_TRY_ASSIGN(L.down, b.get(p + "ffn_down.weight", ff, d, false));
      L.rope_freqs = rope_freqs;
      w.layers.push_back(L);
      continue;
    }
    if (phi) {
      STRATA_TRY_ASSIGN(L.wqkv, b.get(p + "attn_qkv.weight", d, qd + 2 * kvd, false));
    } else {
      STRATA_TRY_ASSIGN(L.wq, b.get(p + "attn_q.weight", d, qd, false));
      STRATA_TRY_ASSIGN(L.wk, b.get(p + "attn_k.weight", d, kvd, false));
      STRATA_TRY_ASSIGN(L.wv, b.get(p + "attn_v.weight", d, kvd, false));
    }
    STRATA_TRY_ASSIGN(L.wo, b.get(p + "attn_output.weight", qd, d, false));
    const bool qwen2 = h.architecture == arch::qwen2 || h.architecture == arch::gpt_oss;
    STRATA_TRY_ASSIGN(L.bq, b.get(p + "attn_q.bias", qd, 1, !qwen2, true));
    STRATA_TRY_ASSIGN(L.bk, b.get(p + "attn_k.bias", kvd, 1, !qwen2, true));
    STRATA_TRY_ASSIGN(L.bv, b.get(p + "attn_v.bias", kvd, 1, !qwen2, true));
    if (h.architecture == arch::qwen3 || h.architecture == arch::qwen3moe || h.architecture == arch::gemma3) {
      STRATA_TRY_ASSIGN(L.q_norm, b.get(p + "attn_q_norm.weight", h.head_dim, 1, false, true));
      STRATA_TRY_ASSIGN(L.k_norm, b.get(p + "attn_k_norm.weight", h.head_dim, 1, false, true));
    }
    if (gemma) {
      STRATA_TRY_ASSIGN(L.post_attn_norm, b.get(p + "post_attention_norm.weight", d, 1, false, true));
      STRATA_TRY_ASSIGN(L.post_ffn_norm, b.get(p + "post_ffw_norm.weight", d, 1, false, true));
    }
    if (h.architecture == arch::gpt_oss) {
      STRATA_TRY_ASSIGN(L.bo, b.get(p + "attn_output.bias", d, 1, false, true));
      STRATA_TRY_ASSIGN(L.attn_sinks, b.get(p + "attn_sinks.weight", h.n_head, 1, false, true));
    }
    const std::string ffn_norm = h.architecture == arch::gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight";
    STRATA_TRY_ASSIGN(L.ffn_norm, b.get(p + ffn_norm, d, 1, false, true));
    if (h.moe()) {
      if (auto r = bind_experts(b, h, p, L); !r) return std::move(r).err();
      L.rope_freqs = rope_freqs;
      w.layers.push_back(L);
      continue;
    }
    if (phi) {
      STRATA_TRY_ASSIGN(L.gate_up, b.get(p + "ffn_up.weight", d, 2 * ff, false));
    } else {
      STRATA_TRY_ASSIGN(L.gate, b.get(p + "ffn_gate.weight", d, ff, false));
      STRATA_TRY_ASSIGN(L.up, b.get(p + "ffn_up.weight", d, ff, false));
    }
    STRATA_TRY_ASSIGN(L.down, b.get(p + "ffn_down.weight", ff, d, false));
    L.rope_freqs = rope_freqs;
    w.layers.push_back(L);
  }
  // A decoded token reads one embedding row, not the whole table (unless it is the tied output).
  std::uint64_t total = b.bytes();
  w.bytes_per_token = total - embd_bytes + (w.output.data == w.token_embd.data ? embd_bytes : 0);
  return w;
}

}  // namespace strata::model
