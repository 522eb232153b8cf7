#include "src/model/synth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/quants.hpp"
#include "kernels/types.hpp"
#include "src/model/builtin_vocab.hpp"
#include "src/model/gguf_file.hpp"
#include "src/model/gguf_writer.hpp"
#include "src/model/synth_layout.hpp"

namespace strata::model {
namespace {

using kernels::dtype;
using namespace synth_layout;

/// A --type: llama.cpp's file type id and the type most weight matrices get.
struct file_type {
  std::string_view name;
  std::uint32_t ftype;  // llama_ftype as stored in general.file_type
  dtype base;
  bool k_mix;           // the _M mixes of K-quants
};

constexpr file_type k_file_types[] = {
    {"f32", 0, dtype::f32, false},    {"f16", 1, dtype::f16, false},    {"bf16", 32, dtype::bf16, false}, {"q8_0", 7, dtype::q8_0, false},
    {"q4_0", 2, dtype::q4_0, false},  {"q4_1", 3, dtype::q4_1, false},  {"q5_0", 8, dtype::q5_0, false},
    {"q5_1", 9, dtype::q5_1, false},  {"iq4_nl", 25, dtype::iq4_nl, false}, {"q4_k_m", 15, dtype::q4_k, true},
    {"q5_k_m", 17, dtype::q5_k, true}, {"q6_k", 18, dtype::q6_k, false}, {"mxfp4_moe", 38, dtype::q8_0, false},
};

/// llama.cpp's MXFP4_MOE mix: the experts' stacked matrices in mxfp4, every other matrix q8_0.
constexpr std::uint32_t k_ftype_mxfp4_moe = 38;

const file_type* find_file_type(std::string_view name) {
  for (const file_type& t : k_file_types) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

/// Per-architecture constants, as the converter writes them for the common checkpoints.
struct arch_defaults {
  std::string_view name;
  double rms_eps;
  double rope_base;
  bool tied;
};

constexpr arch_defaults k_archs[] = {
    {"llama", 1e-5, 10000.0, false}, {"qwen2", 1e-6, 1000000.0, true}, {"qwen3", 1e-6, 1000000.0, true},
    {"gemma2", 1e-6, 10000.0, true}, {"gemma3", 1e-6, 1000000.0, true}, {"phi3", 1e-5, 10000.0, false},
    {"qwen35", 1e-6, 10000000.0, true}, {"qwen3moe", 1e-6, 1000000.0, false}, {"gpt-oss", 1e-5, 150000.0, false},
    {"granitehybrid", 1e-5, 10000.0, false},
};

const arch_defaults* find_arch(std::string_view name) {
  for (const arch_defaults& a : k_archs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

/// llama.cpp's rule for which layers of a _M mix get more bits: the first and last eighth, and
/// every third layer between.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

bool is_k_quant(dtype t) { return t == dtype::q4_k || t == dtype::q5_k || t == dtype::q6_k; }

/// The type a tensor gets in a file of type ft, following llama.cpp's quantizer (without an
/// importance matrix); n_gqa is the number of query heads per key/value head.
dtype pick_type(const file_type& ft, const planned_tensor& t, int n_layers, int n_gqa, bool tied) {
  if (t.kind == role::norm || t.kind == role::bias || t.kind == role::ssm_a || t.kind == role::conv || t.kind == role::router ||
      t.kind == role::sink)
    return dtype::f32;
  if (ft.ftype == k_ftype_mxfp4_moe) return t.ne.size() == 3 ? dtype::mxfp4 : dtype::q8_0;
  dtype d = ft.base;
  const bool quantized = d != dtype::f32 && d != dtype::f16 && d != dtype::bf16;
  const bool is_output = t.kind == role::output || (tied && t.kind == role::embedding);
  if (quantized && is_output && d != dtype::q8_0) {
    d = dtype::q6_k;
  } else if (ft.k_mix) {
    const std::string_view n = t.name;
    const int il = layer_of(t.name);
    if ((n.ends_with("attn_v.weight") || n.ends_with("ffn_down.weight")) && use_more_bits(il, n_layers)) d = dtype::q6_k;
    if (n.ends_with("attn_qkv.weight")) d = d == dtype::q4_k ? dtype::q5_k : dtype::q6_k;
  } else if (d == dtype::iq4_nl) {
    // attn_v gets more bits where four or more query heads read it, ffn_down in the first eighth
    // of the layers.
    const std::string_view n = t.name;
    if (n.ends_with("attn_v.weight") && n_gqa >= 4) d = dtype::q5_k;
    if (n.ends_with("ffn_down.weight") && layer_of(t.name) < n_layers / 8) d = dtype::q5_k;
  }
  // Rows that do not fill K-quant super-blocks fall back to the 32-value type llama.cpp picks:
  // q5_0 for q4_K, q5_1 for q5_K, q8_0 for q6_K.
  if (is_k_quant(d) && t.ne[0] % kernels::k_qk_k != 0) {
    d = d == dtype::q4_k ? dtype::q5_0 : d == dtype::q5_k ? dtype::q5_1 : dtype::q8_0;
  }
  return d;
}

/// qwen35's derived delta-rule shape (see synth_options).
struct ssm_shape {
  std::int64_t state, k_heads, v_heads;
  std::int64_t key_dim() const { return state * k_heads; }
  std::int64_t inner() const { return state * v_heads; }
  std::int64_t conv_dim() const { return 2 * key_dim() + inner(); }
};

ssm_shape ssm_of(const synth_options& o, int head_dim) {
  return {o.ssm_state ? o.ssm_state : std::min(head_dim, 128), o.ssm_k_heads ? o.ssm_k_heads : (o.heads % 2 ? o.heads : o.heads / 2),
          o.ssm_v_heads ? o.ssm_v_heads : o.heads};
}

/// A qwen35 layer's tensors: a Gated DeltaNet mixer or a gated attention one (wq holds each
/// head's query and gate), then post_attention_norm (the FFN's norm) and the FFN.
void plan_qwen35_layer(const synth_options& o, int il, int head_dim, std::vector<planned_tensor>& t) {
  const std::int64_t d = o.hidden, qd = static_cast<std::int64_t>(o.heads) * head_dim,
                     kvd = static_cast<std::int64_t>(o.kv_heads) * head_dim, ff = o.ffn;
  const std::string p = "blk." + std::to_string(il) + ".";
  const ssm_shape s = ssm_of(o, head_dim);
  t.push_back({p + "attn_norm.weight", {d}, role::norm});
  if (hybrid_recurrent(o, il)) {
    t.push_back({p + "attn_qkv.weight", {d, s.conv_dim()}, role::weight});
    t.push_back({p + "attn_gate.weight", {d, s.inner()}, role::weight});
    t.push_back({p + "ssm_conv1d.weight", {o.ssm_conv, s.conv_dim()}, role::conv});
    t.push_back({p + "ssm_dt.bias", {s.v_heads}, role::bias});
    t.push_back({p + "ssm_a", {s.v_heads}, role::ssm_a});
    t.push_back({p + "ssm_beta.weight", {d, s.v_heads}, role::weight});
    t.push_back({p + "ssm_alpha.weight", {d, s.v_heads}, role::weight});
    t.push_back({p + "ssm_norm.weight", {s.state}, role::norm});
    t.push_back({p + "ssm_out.weight", {s.inner(), d}, role::weight});
  } else {
    t.push_back({p + "attn_q.weight", {d, 2 * qd}, role::weight});
    t.push_back({p + "attn_k.weight", {d, kvd}, role::weight});
    t.push_back({p + "attn_v.weight", {d, kvd}, role::weight});
    t.push_back({p + "attn_output.weight", {qd, d}, role::weight});
    t.push_back({p + "attn_q_norm.weight", {head_dim}, role::norm});
    t.push_back({p + "attn_k_norm.weight", {head_dim}, role::norm});
  }
  t.push_back({p + "post_attention_norm.weight", {d}, role::norm});
  t.push_back({p + "ffn_gate.weight", {d, ff}, role::weight});
  t.push_back({p + "ffn_up.weight", {d, ff}, role::weight});
  t.push_back({p + "ffn_down.weight", {ff, d}, role::weight});
}

bool is_moe(const synth_options& o) { return o.arch == "qwen3moe" || o.arch == "gpt-oss"; }

std::int64_t expert_ffn_of(const synth_options& o) { return o.expert_ffn ? o.expert_ffn : o.ffn / o.experts_used; }

/// A mixture of experts' feed-forward tensors: the router and the experts' stacked matrices.
void plan_experts(const synth_options& o, const std::string& p, std::vector<planned_tensor>& t) {
  const std::int64_t d = o.hidden, ff = expert_ffn_of(o), ne = o.experts;
  t.push_back({p + "ffn_gate_inp.weight", {d, ne}, role::router});
  t.push_back({p + "ffn_gate_exps.weight", {d, ff, ne}, role::weight});
  t.push_back({p + "ffn_up_exps.weight", {d, ff, ne}, role::weight});
  t.push_back({p + "ffn_down_exps.weight", {ff, d, ne}, role::weight});
  if (o.arch != "gpt-oss") return;
  t.push_back({p + "ffn_gate_inp.bias", {ne}, role::bias});
  t.push_back({p + "ffn_gate_exps.bias", {ff, ne}, role::bias});
  t.push_back({p + "ffn_up_exps.bias", {ff, ne}, role::bias});
  t.push_back({p + "ffn_down_exps.bias", {d, ne}, role::bias});
}

/// A gpt-oss layer: attention with biases on every projection and a sink per head, then
/// post_attention_norm (the FFN's norm) and the experts.
void plan_gpt_oss_layer(const synth_options& o, int il, int head_dim, std::vector<planned_tensor>& t) {
  const std::int64_t d = o.hidden, qd = static_cast<std::int64_t>(o.heads) * head_dim, kvd = static_cast<std::int64_t>(o.kv_heads) * head_dim;
  const std::string p = "blk." + std::to_string(il) + ".";
  t.push_back({p + "attn_norm.weight", {d}, role::norm});
  t.push_back({p + "attn_q.weight", {d, qd}, role::weight});
  t.push_back({p + "attn_k.weight", {d, kvd}, role::weight});
  t.push_back({p + "attn_v.weight", {d, kvd}, role::weight});
  t.push_back({p + "attn_output.weight", {qd, d}, role::weight});
  t.push_back({p + "attn_q.bias", {qd}, role::bias});
  t.push_back({p + "attn_k.bias", {kvd}, role::bias});
  t.push_back({p + "attn_v.bias", {kvd}, role::bias});
  t.push_back({p + "attn_output.bias", {d}, role::bias});
  t.push_back({p + "attn_sinks.weight", {o.heads}, role::sink});
  t.push_back({p + "post_attention_norm.weight", {d}, role::norm});
  plan_experts(o, p, t);
}

std::vector<planned_tensor> plan(const synth_options& o, int head_dim, std::int64_t n_vocab, bool tied) {
  const std::int64_t d = o.hidden, qd = static_cast<std::int64_t>(o.heads) * head_dim,
                     kvd = static_cast<std::int64_t>(o.kv_heads) * head_dim, ff = o.ffn;
  std::vector<planned_tensor> t;
  t.push_back({"token_embd.weight", {d, n_vocab}, role::embedding});
  for (int il = 0; il < o.layers; ++il) {
    if (o.arch == "qwen35") {
      plan_qwen35_layer(o, il, head_dim, t);
      continue;
    }
    if (o.arch == "gpt-oss") {
      plan_gpt_oss_layer(o, il, head_dim, t);
      continue;
    }
    if (o.arch == "granitehybrid") {
      plan_granite_layer(o, il, head_dim, t);
      continue;
    }
    const std::string p = "blk." + std::to_string(il) + ".";
    t.push_back({p + "attn_norm.weight", {d}, role::norm});
    if (o.arch == "phi3") {
      t.push_back({p + "attn_qkv.weight", {d, qd + 2 * kvd}, role::weight});
    } else {
      t.push_back({p + "attn_q.weight", {d, qd}, role::weight});
      t.push_back({p + "attn_k.weight", {d, kvd}, role::weight});
      t.push_back({p + "attn_v.weight", {d, kvd}, role::weight});
    }
    t.push_back({p + "attn_output.weight", {qd, d}, role::weight});
    if (o.arch == "qwen2") {
      t.push_back({p + "attn_q.bias", {qd}, role::bias});
      t.push_back({p + "attn_k.bias", {kvd}, role::bias});
      t.push_back({p + "attn_v.bias", {kvd}, role::bias});
    }
    if (o.arch == "qwen3" || o.arch == "qwen3moe" || o.arch == "gemma3") {
      t.push_back({p + "attn_q_norm.weight", {head_dim}, role::norm});
      t.push_back({p + "attn_k_norm.weight", {head_dim}, role::norm});
    }
    if (o.arch == "gemma2" || o.arch == "gemma3") {
      t.push_back({p + "post_attention_norm.weight", {d}, role::norm});
      t.push_back({p + "post_ffw_norm.weight", {d}, role::norm});
    }
    t.push_back({p + "ffn_norm.weight", {d}, role::norm});
    if (is_moe(o)) {
      plan_experts(o, p, t);
      continue;
    }
    if (o.arch == "phi3") {
      t.push_back({p + "ffn_up.weight", {d, 2 * ff}, role::weight});  // gate and up, stacked
    } else {
      t.push_back({p + "ffn_gate.weight", {d, ff}, role::weight});
      t.push_back({p + "ffn_up.weight", {d, ff}, role::weight});
    }
    t.push_back({p + "ffn_down.weight", {ff, d}, role::weight});
  }
  t.push_back({"output_norm.weight", {d}, role::norm});
  if (!tied) t.push_back({"output.weight", {d, n_vocab}, role::output});
  return t;
}

/// splitmix64: a counter-based generator, so every tensor's values depend only on the seed and
/// its name.
class rng {
 public:
  explicit rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Approximately standard normal: the centred sum of four uniforms (Irwin-Hall), from one draw.
  float normal() {
    std::uint64_t r = next();
    float sum = 0;
    for (int i = 0; i < 4; ++i, r >>= 16) sum += (static_cast<float>(r & 0xFFFF) + 0.5f) * (1.0f / 65536.0f);
    return (sum - 2.0f) * 1.7320508f;  // variance of the sum is 4/12
  }

 private:
  std::uint64_t s_;
};

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

/// Writes a tensor's random values row block by row block, converted to its type.
gguf_writer::tensor_source random_source(planned_tensor t, std::uint64_t seed) {
  return [t = std::move(t), seed](const gguf_writer::tensor_sink& sink) -> result<void> {
    const std::int64_t cols = t.ne[0];
    std::int64_t rows = 1;
    for (std::size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    float mean = 0, stddev = 0.02f;
    if (t.kind == role::norm) {
      mean = 1.0f;
    } else if (t.kind == role::sink) {
      stddev = 1.0f;
    } else if (t.kind == role::conv) {
      stddev = 1.0f / std::sqrt(static_cast<float>(cols));  // the taps of one channel
    } else if (t.kind != role::bias && t.kind != role::ssm_a) {
      // fan-in scaling keeps activations and logits in a useful range; clamped to 0.02..0.08.
      stddev = std::clamp(1.0f / std::sqrt(static_cast<float>(cols)), 0.02f, 0.08f);
    }
    rng r(seed ^ fnv1a(t.name));
    const std::size_t row_bytes = kernels::row_bytes(t.type, cols);
    const std::int64_t rows_per_chunk = std::max<std::int64_t>(1, (1 << 20) / cols);
    std::vector<float> values(static_cast<std::size_t>(cols));
    std::vector<std::byte> out;
    for (std::int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
      const std::int64_t n = std::min(rows_per_chunk, rows - r0);
      out.resize(static_cast<std::size_t>(n) * row_bytes);
      for (std::int64_t i = 0; i < n; ++i) {
        for (float& v : values) v = mean + stddev * r.normal();
        // -exp(A_log), A_log around -2: decays that keep a few to a few dozen positions.
        if (t.kind == role::ssm_a)
          for (float& v : values) v = -std::exp(-2.0f + v / stddev);
        kernels::quantize_row(t.type, values.data(), out.data() + static_cast<std::size_t>(i) * row_bytes, cols);
      }
      if (auto ok = sink(out); !ok) return ok;
    }
    return {};
  };
}

/// qwen35's own limits: the types its converter writes, a head of at least the 32 values its
/// rotary sections span and a rotated quarter of even length, and a delta-rule shape strata runs.
result<void> validate_qwen35(const synth_options& o, const file_type& ft, int head_dim) {
  if (ft.base != dtype::f32 && ft.base != dtype::f16 && ft.base != dtype::bf16 && ft.base != dtype::q8_0)
    return fail(errc::invalid_argument, "--type ", o.type, " is not written for qwen35 (f32, f16, bf16 or q8_0 are)");
  if (head_dim < 32 || head_dim % 8 != 0)
    return fail(errc::invalid_argument, "qwen35's head length ", head_dim, " must be a multiple of 8 and at least 32");
  const ssm_shape s = ssm_of(o, head_dim);
  if (s.state < 2 || s.state > kernels::k_attention_max_head_dim)
    return fail(errc::invalid_argument, "--ssm-state must be between 2 and ", kernels::k_attention_max_head_dim, ", got ", s.state);
  if (s.k_heads < 1 || s.v_heads < 1 || s.v_heads % s.k_heads != 0)
    return fail(errc::invalid_argument, "--ssm-v-heads ", s.v_heads, " must be a multiple of --ssm-k-heads ", s.k_heads);
  if (auto r = validate_conv_and_period(o); !r) return r;
  if (ft.base == dtype::q8_0 && (s.conv_dim() % kernels::k_qk != 0 || s.inner() % kernels::k_qk != 0))
    return fail(errc::invalid_argument, "the delta rule's widths must be multiples of ", kernels::k_qk, " for --type q8_0");
  return {};
}

/// qwen35's keys as its converter writes them: the delta-rule shape, the full-attention period, a
/// quarter of each head rotated, and the default rotary sections.
void write_qwen35_keys(const synth_options& o, int head_dim, gguf_writer& w) {
  const std::string p = "qwen35.";
  const ssm_shape s = ssm_of(o, head_dim);
  w.add_u32(p + "ssm.conv_kernel", static_cast<std::uint32_t>(o.ssm_conv));
  w.add_u32(p + "ssm.state_size", static_cast<std::uint32_t>(s.state));
  w.add_u32(p + "ssm.group_count", static_cast<std::uint32_t>(s.k_heads));
  w.add_u32(p + "ssm.time_step_rank", static_cast<std::uint32_t>(s.v_heads));
  w.add_u32(p + "ssm.inner_size", static_cast<std::uint32_t>(s.inner()));
  w.add_u32(p + "full_attention_interval", static_cast<std::uint32_t>(o.attn_interval));
  w.add_u32(p + "rope.dimension_count", static_cast<std::uint32_t>(head_dim / 4));
  const std::int32_t sections[] = {11, 11, 10, 0};
  w.add_i32_array(p + "rope.dimension_sections", sections);
}

/// The experts' shape: at least one used of at most 4096, and an expert length that fills the
/// type's blocks.
result<void> validate_experts(const synth_options& o, const file_type& ft) {
  if (o.experts < 1 || o.experts > 4096) return fail(errc::invalid_argument, "--experts must be between 1 and 4096, got ", o.experts);
  if (o.experts_used < 1 || o.experts_used > o.experts)
    return fail(errc::invalid_argument, "--experts-used must be between 1 and --experts (", o.experts, "), got ", o.experts_used);
  const std::int64_t ff = expert_ffn_of(o);
  if (ff < 1 || ff > (1 << 20)) return fail(errc::invalid_argument, "--expert-ffn must be between 1 and 1048576, got ", ff);
  const bool blocks = ft.base != dtype::f32 && ft.base != dtype::f16 && ft.base != dtype::bf16;
  if (blocks && ff % kernels::k_qk != 0)
    return fail(errc::invalid_argument, "--expert-ffn (", ff, ") must be a multiple of ", kernels::k_qk, " for --type ", o.type);
  return {};
}

/// The experts' keys, as the converter writes them; gpt-oss's adds its window of 128 positions and
/// the YaRN scaling of its checkpoints (factor 32 over an original context of 4096).
void write_expert_keys(const synth_options& o, gguf_writer& w) {
  const std::string p = o.arch + ".";
  w.add_u32(p + "expert_count", static_cast<std::uint32_t>(o.experts));
  w.add_u32(p + "expert_used_count", static_cast<std::uint32_t>(o.experts_used));
  w.add_u32(p + "expert_feed_forward_length", static_cast<std::uint32_t>(expert_ffn_of(o)));
  if (o.arch != "gpt-oss") return;
  w.add_u32(p + "attention.sliding_window", static_cast<std::uint32_t>(std::min<std::int64_t>(128, o.ctx)));
  w.add_string(p + "rope.scaling.type", "yarn");
  w.add_f32(p + "rope.scaling.factor", 32.0f);
  w.add_u32(p + "rope.scaling.original_context_length", 4096);
  w.add_f32(p + "rope.scaling.yarn_beta_fast", 32.0f);
  w.add_f32(p + "rope.scaling.yarn_beta_slow", 1.0f);
}

}  // namespace

result<void> validate(const synth_options& o) {
  const arch_defaults* a = find_arch(o.arch);
  if (!a)
    return fail(errc::invalid_argument, "--arch '", o.arch, "' is not one of llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, gpt-oss, granitehybrid");
  const file_type* ft = find_file_type(o.type);
  if (!ft) return fail(errc::invalid_argument, "--type '", o.type, "' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k_m, q5_k_m, q6_k, mxfp4_moe");
  if (ft->ftype == k_ftype_mxfp4_moe && o.arch != "qwen3moe" && o.arch != "gpt-oss")
    return fail(errc::invalid_argument, "--type mxfp4_moe is for mixtures of experts (qwen3moe, gpt-oss)");
  if (o.layers < 1 || o.layers > 1024) return fail(errc::invalid_argument, "--layers must be between 1 and 1024, got ", o.layers);
  if (o.hidden < 1 || o.hidden > 65536) return fail(errc::invalid_argument, "--hidden must be between 1 and 65536, got ", o.hidden);
  if (o.heads < 1 || o.heads > 1024) return fail(errc::invalid_argument, "--heads must be between 1 and 1024, got ", o.heads);
  if (o.kv_heads < 1 || o.kv_heads > o.heads) return fail(errc::invalid_argument, "--kv-heads must be between 1 and --heads (", o.heads, "), got ", o.kv_heads);
  if (o.heads % o.kv_heads != 0) return fail(errc::invalid_argument, "--kv-heads ", o.kv_heads, " must divide --heads ", o.heads);
  if (o.ffn < 1 || o.ffn > (1 << 20)) return fail(errc::invalid_argument, "--ffn must be between 1 and 1048576, got ", o.ffn);
  if (o.head_dim < 0) return fail(errc::invalid_argument, "--head-dim must be positive, got ", o.head_dim);
  if (o.head_dim == 0 && o.hidden % o.heads != 0)
    return fail(errc::invalid_argument, "--heads ", o.heads, " must divide --hidden ", o.hidden, " (or give --head-dim)");
  const int head_dim = o.head_dim ? o.head_dim : o.hidden / o.heads;
  if (head_dim % 2 != 0) return fail(errc::invalid_argument, "the head length ", head_dim, " must be even (rotary embeddings rotate pairs)");
  if (head_dim > kernels::k_attention_max_head_dim)
    return fail(errc::invalid_argument, "the head length ", head_dim, " exceeds the longest strata supports (", kernels::k_attention_max_head_dim, ")");
  if (o.ctx < 1 || o.ctx > (1 << 24)) return fail(errc::invalid_argument, "--ctx must be between 1 and 16777216, got ", o.ctx);
  if (ft->base != dtype::f32 && ft->base != dtype::f16 && ft->base != dtype::bf16) {
    const std::int64_t block = kernels::k_qk;
    auto check = [&](const char* what, std::int64_t v) -> result<void> {
      if (v % block != 0) return fail(errc::invalid_argument, what, " (", v, ") must be a multiple of ", block, " for --type ", o.type);
      return {};
    };
    if (auto r = check("--hidden", o.hidden); !r) return r;
    if (auto r = check("--ffn", o.ffn); !r) return r;
    if (auto r = check("--heads times the head length", static_cast<std::int64_t>(o.heads) * head_dim); !r) return r;
  }
  if ((o.arch == "gemma2" || o.arch == "gemma3") && o.tied == false)
    return fail(errc::invalid_argument, o.arch, " always ties the output to the embeddings");
  if (o.arch == "qwen35") {
    if (auto r = validate_qwen35(o, *ft, head_dim); !r) return r;
  }
  if (is_moe(o)) {
    if (auto r = validate_experts(o, *ft); !r) return r;
  }
  if (o.arch == "granitehybrid") {
    if (auto r = validate_granite(o); !r) return r;
  }
  if (o.vocab.empty()) return fail(errc::invalid_argument, "--vocab is required (a GGUF file, or 'builtin')");
  if (o.out.empty()) return fail(errc::invalid_argument, "--out is required");
  return {};
}

result<void> synthesize(const synth_options& o, const progress_callback& progress) {
  if (auto r = validate(o); !r) return r;
  const arch_defaults& a = *find_arch(o.arch);
  const file_type& ft = *find_file_type(o.type);
  const int head_dim = o.head_dim ? o.head_dim : o.hidden / o.heads;
  const bool tied = o.tied.value_or(a.tied);
  const std::string p = o.arch + ".";

  gguf_writer w;
  w.add_string("general.architecture", o.arch);
  w.add_string("general.name", o.name.empty() ? "strata-synth-" + o.arch : o.name);
  w.add_u32(p + "context_length", static_cast<std::uint32_t>(o.ctx));
  w.add_u32(p + "embedding_length", static_cast<std::uint32_t>(o.hidden));
  w.add_u32(p + "block_count", static_cast<std::uint32_t>(o.layers));
  w.add_u32(p + "feed_forward_length", static_cast<std::uint32_t>(o.ffn));
  w.add_u32(p + "attention.head_count", static_cast<std::uint32_t>(o.heads));
  if (o.arch == "granitehybrid") write_granite_keys(o, head_dim, w);  // head_count_kv per layer
  else w.add_u32(p + "attention.head_count_kv", static_cast<std::uint32_t>(o.kv_heads));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(a.rms_eps));
  w.add_f32(p + "rope.freq_base", static_cast<float>(a.rope_base));

  // The vocabulary decides the embedding rows; its tokenizer keys are added after the model's.
  std::optional<gguf_file> vocab_file;
  std::int64_t n_vocab = 0;
  if (o.vocab == "builtin") {
    n_vocab = static_cast<std::int64_t>(builtin_vocab::get().tokens.size());
  } else {
    auto f = gguf_file::open(o.vocab);
    if (!f) return fail(f.err().code, "--vocab: ", f.err().message);
    auto tokens = f->array_size("tokenizer.ggml.tokens");
    if (!tokens || f->array_type("tokenizer.ggml.tokens") != gguf_type::string || *tokens == 0)
      return fail(errc::corrupt_data, "--vocab ", o.vocab, " has no tokenizer.ggml.tokens string array");
    n_vocab = static_cast<std::int64_t>(*tokens);
    vocab_file.emplace(std::move(*f));
  }
  w.add_u32(p + "vocab_size", static_cast<std::uint32_t>(n_vocab));
  if (o.arch == "qwen3" || o.arch == "qwen3moe" || o.arch == "gpt-oss" || o.arch == "qwen35" || o.arch == "gemma2" || o.arch == "gemma3" || head_dim * o.heads != o.hidden) {
    w.add_u32(p + "attention.key_length", static_cast<std::uint32_t>(head_dim));
    w.add_u32(p + "attention.value_length", static_cast<std::uint32_t>(head_dim));
  }
  if (o.arch == "qwen35") {
    write_qwen35_keys(o, head_dim, w);
  } else {
    w.add_u32(p + "rope.dimension_count", static_cast<std::uint32_t>(head_dim));
  }
  if (o.arch == "gemma2") {
    w.add_u32(p + "attention.sliding_window", static_cast<std::uint32_t>(std::min<std::int64_t>(4096, o.ctx)));
    w.add_f32(p + "attn_logit_softcapping", 50.0f);
    w.add_f32(p + "final_logit_softcapping", 30.0f);
  }
  if (o.arch == "gemma3") {
    // Gemma 3's window and local rotary base; the sliding pattern is llama.cpp's default (five
    // sliding layers, then a global one), as in the converted checkpoints.
    w.add_u32(p + "attention.sliding_window", static_cast<std::uint32_t>(std::min<std::int64_t>(512, o.ctx)));
    w.add_f32(p + "rope.freq_base_swa", 10000.0f);
  }
  if (o.arch == "phi3") w.add_u32(p + "rope.scaling.original_context_length", static_cast<std::uint32_t>(o.ctx));
  if (is_moe(o)) write_expert_keys(o, w);
  w.add_u32("general.file_type", ft.ftype);
  w.add_u32("general.quantization_version", 2);
  if (vocab_file) {
    for (const std::string& k : vocab_file->keys()) {
      if (k.rfind("tokenizer.", 0) != 0) continue;
      if (auto r = w.copy_kv(*vocab_file, k); !r) return r;
    }
  } else {
    builtin_vocab::get().write_to(w);
  }

  std::vector<planned_tensor> tensors = plan(o, head_dim, n_vocab, tied);
  for (planned_tensor& t : tensors) {
    t.type = pick_type(ft, t, o.layers, o.heads / o.kv_heads, tied);
    const std::string name = t.name;
    const std::vector<std::int64_t> ne = t.ne;
    const auto type = static_cast<std::uint32_t>(t.type);
    if (auto r = w.add_tensor(name, type, ne, random_source(std::move(t), o.seed)); !r) return r;
  }
  return w.write_file(o.out, progress);
}

}  // namespace strata::model
