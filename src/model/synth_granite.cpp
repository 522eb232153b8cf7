// strata synth's granitehybrid layout (synth_layout.hpp), as llama.cpp's converter writes Granite 4.0-H.

#include <string>
#include <vector>

#include "src/model/synth_layout.hpp"

namespace strata::model::synth_layout {
namespace {

/// granitehybrid's Mamba-2 shape: d_inner twice the embedding (the only expansion llama.cpp
/// reads), heads of 64 channels unless --ssm-v-heads says, --ssm-k-heads groups (default 1),
/// --ssm-state values per channel (default 128).
struct mamba_shape {
  std::int64_t state, groups, heads, inner;
  std::int64_t conv_dim() const { return inner + 2 * groups * state; }
  std::int64_t in_proj() const { return inner + conv_dim() + heads; }
};

mamba_shape mamba_of(const synth_options& o) {
  const std::int64_t inner = 2 * static_cast<std::int64_t>(o.hidden);
  return {o.ssm_state ? o.ssm_state : 128, o.ssm_k_heads ? o.ssm_k_heads : 1,
          o.ssm_v_heads ? o.ssm_v_heads : (inner % 64 == 0 ? inner / 64 : 1), inner};
}

}  // namespace

result<void> validate_conv_and_period(const synth_options& o) {
  if (o.ssm_conv < 2 || o.ssm_conv > 16) return fail(errc::invalid_argument, "--ssm-conv must be between 2 and 16, got ", o.ssm_conv);
  if (o.attn_interval < 1 || o.attn_interval > 1024)
    return fail(errc::invalid_argument, "--attn-interval must be between 1 and 1024, got ", o.attn_interval);
  return {};
}

/// A granitehybrid layer: a Mamba-2 mixer (as the converter writes it: A = -exp(A_log) and D of
/// shape [1, heads], the norm's weights per group) or plain attention, then ffn_norm and the FFN.
void plan_granite_layer(const synth_options& o, int il, int head_dim, std::vector<planned_tensor>& t) {
  const std::int64_t d = o.hidden, qd = static_cast<std::int64_t>(o.heads) * head_dim,
                     kvd = static_cast<std::int64_t>(o.kv_heads) * head_dim, ff = o.ffn;
  const std::string p = "blk." + std::to_string(il) + ".";
  const mamba_shape m = mamba_of(o);
  t.push_back({p + "attn_norm.weight", {d}, role::norm});
  if (hybrid_recurrent(o, il)) {
    t.push_back({p + "ssm_in.weight", {d, m.in_proj()}, role::weight});
    t.push_back({p + "ssm_conv1d.weight", {o.ssm_conv, m.conv_dim()}, role::conv});
    t.push_back({p + "ssm_conv1d.bias", {m.conv_dim()}, role::bias});
    t.push_back({p + "ssm_dt.bias", {m.heads}, role::bias});
    t.push_back({p + "ssm_a", {1, m.heads}, role::ssm_a});
    t.push_back({p + "ssm_d", {1, m.heads}, role::norm});
    t.push_back({p + "ssm_norm.weight", {m.inner / m.groups, m.groups}, role::norm});
    t.push_back({p + "ssm_out.weight", {m.inner, d}, role::weight});
  } else {
    t.push_back({p + "attn_q.weight", {d, qd}, role::weight});
    t.push_back({p + "attn_k.weight", {d, kvd}, role::weight});
    t.push_back({p + "attn_v.weight", {d, kvd}, role::weight});
    t.push_back({p + "attn_output.weight", {qd, d}, role::weight});
  }
  t.push_back({p + "ffn_norm.weight", {d}, role::norm});
  t.push_back({p + "ffn_gate.weight", {d, ff}, role::weight});
  t.push_back({p + "ffn_up.weight", {d, ff}, role::weight});
  t.push_back({p + "ffn_down.weight", {ff, d}, role::weight});
}

/// granitehybrid's limits and keys: a Mamba-2 shape strata runs; head_count_kv per layer (0 for
/// the Mamba-2 layers), the ssm.* keys, Granite's multipliers (attention's 1 / head length) and no
/// rotary embedding, as the converter writes them.
result<void> validate_granite(const synth_options& o) {
  const mamba_shape m = mamba_of(o);
  if (m.state < 1 || m.state > 1024) return fail(errc::invalid_argument, "--ssm-state must be between 1 and 1024, got ", m.state);
  if (m.groups < 1 || m.heads < 1 || m.heads % m.groups != 0 || m.inner % m.heads != 0)
    return fail(errc::invalid_argument, "--ssm-v-heads ", m.heads, " must divide 2 x --hidden and be a multiple of --ssm-k-heads ", m.groups);
  return validate_conv_and_period(o);
}

void write_granite_keys(const synth_options& o, int head_dim, gguf_writer& w) {
  const std::string p = "granitehybrid.";
  const mamba_shape m = mamba_of(o);
  std::vector<std::int32_t> kv_heads;
  for (int il = 0; il < o.layers; ++il) kv_heads.push_back(hybrid_recurrent(o, il) ? 0 : o.kv_heads);
  w.add_i32_array(p + "attention.head_count_kv", kv_heads);
  w.add_u32(p + "ssm.conv_kernel", static_cast<std::uint32_t>(o.ssm_conv));
  w.add_u32(p + "ssm.state_size", static_cast<std::uint32_t>(m.state));
  w.add_u32(p + "ssm.group_count", static_cast<std::uint32_t>(m.groups));
  w.add_u32(p + "ssm.inner_size", static_cast<std::uint32_t>(m.inner));
  w.add_u32(p + "ssm.time_step_rank", static_cast<std::uint32_t>(m.heads));
  w.add_f32(p + "attention.scale", 1.0f / static_cast<float>(head_dim));
  // Granite 4.0-H uses 12, 0.22 and 6..10; these keep a random model's logits spread apart.
  w.add_f32(p + "embedding_scale", 4.0f);
  w.add_f32(p + "residual_scale", 0.5f);
  w.add_f32(p + "logit_scale", 0.5f);
  w.add_bool(p + "rope.scaling.finetuned", false);
}

}  // namespace strata::model::synth_layout
