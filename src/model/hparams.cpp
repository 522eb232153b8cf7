#include "src/model/hparams.hpp"

#include <cmath>
#include <limits>

#include "kernels/attention.hpp"

namespace strata::model {

const char* arch_name(arch a) {
  switch (a) {
    case arch::llama: return "llama";
    case arch::qwen2: return "qwen2";
    case arch::qwen3: return "qwen3";
    case arch::gemma2: return "gemma2";
    case arch::gemma3: return "gemma3";
    case arch::phi3: return "phi3";
    case arch::qwen35: return "qwen35";
    case arch::qwen3moe: return "qwen3moe";
    case arch::gpt_oss: return "gpt-oss";
    case arch::granitehybrid: return "granitehybrid";
  }
  return "?";
}

namespace {

/// An optional float key: absent leaves `out` as it is; present, it must be a number within
/// (0, hi] (finite); NaN, infinities, zero and negatives are refused, naming the key.
result<void> positive_float(const gguf_file& f, const std::string& key, float& out, double hi = 1e30) {
  if (!f.has(key)) return {};
  auto v = f.get_float(key);
  if (!v) return fail(errc::corrupt_data, "metadata key ", key, " is not a number");
  if (!std::isfinite(*v) || !(*v > 0) || *v > hi) return fail(errc::corrupt_data, "metadata key ", key, " = ", *v, " must be a positive finite number");
  out = static_cast<float>(*v);
  return {};
}

/// An optional soft-cap (or other factor): absent leaves `out`; present, a finite number >= 0 (0
/// turns a soft-cap off).
result<void> nonnegative_float(const gguf_file& f, const std::string& key, float& out) {
  if (!f.has(key)) return {};
  auto v = f.get_float(key);
  if (!v || !std::isfinite(*v) || *v < 0) return fail(errc::corrupt_data, "metadata key ", key, " must be a finite number >= 0");
  out = static_cast<float>(*v);
  return {};
}

/// The sliding window and which layers use it. Without a window every layer is global. With one,
/// the layers that slide are listed per layer (an array of booleans) or follow a period p: of every
/// p layers the first p - 1 slide and the last is global (p = default_period when absent; p = 0:
/// all slide).
result<void> read_sliding_layers(const gguf_file& f, const std::string& a, hparams& h, std::int64_t default_period) {
  const std::string window_key = a + ".attention.sliding_window";
  if (auto v = f.get_int(window_key); v && *v != 0) {
    if (*v < 0 || *v > (1 << 24)) return fail(errc::corrupt_data, "metadata key ", window_key, " = ", *v, " is out of range");
    h.sliding_window = static_cast<std::int32_t>(*v);
  } else if (f.has(window_key) && !v) {
    return fail(errc::corrupt_data, "metadata key ", window_key, " is not an integer");
  }
  if (h.sliding_window == 0) return {};
  const std::string pattern_key = a + ".attention.sliding_window_pattern";
  if (f.array_size(pattern_key)) {
    auto layers = f.get_int_array(pattern_key);
    if (!layers || layers->size() != static_cast<std::size_t>(h.n_layer))
      return fail(errc::corrupt_data, "metadata key ", pattern_key, " must hold one boolean per layer (", h.n_layer, ")");
    for (std::int64_t s : *layers) h.sliding_layers.push_back(s != 0);
  } else {
    std::int64_t period = default_period;
    if (f.has(pattern_key)) {
      auto v = f.get_int(pattern_key);
      if (!v || *v < 0 || *v > h.n_layer)
        return fail(errc::corrupt_data, "metadata key ", pattern_key, " must be a period between 0 and the layer count");
      period = *v;
    }
    for (int il = 0; il < h.n_layer; ++il) h.sliding_layers.push_back(period == 0 || il % period < period - 1);
  }
  return {};
}

/// Gemma 3's additions: which layers slide (a period of 6) and their rotary base, its attention
/// scale, the embedding scale, and a final soft-cap only where the file gives one (no attention
/// soft-cap).
result<void> read_gemma3(const gguf_file& f, const std::string& a, hparams& h) {
  // Gemma 3 27B (62 layers) was trained with query_pre_attn_scalar = n_embd / n_head, the smaller
  // models with the head length; the files carry no key for it.
  if (h.n_layer == 62) h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.n_embd / h.n_head));
  h.embed_scale = std::sqrt(static_cast<float>(h.n_embd));
  if (auto r = nonnegative_float(f, a + ".final_logit_softcapping", h.final_softcap); !r) return r;
  if (auto r = read_sliding_layers(f, a, h, 6); !r) return r;
  if (h.sliding_window == 0) return {};
  // Sliding layers rotate with their own base (10000 unless the file says) and no scaling.
  h.rope_freq_base_swa = 10000.0f;
  if (auto r = positive_float(f, a + ".rope.freq_base_swa", h.rope_freq_base_swa); !r) return r;
  h.rope_freq_scale_swa = 1.0f;
  return {};
}

/// An integer key in [lo, hi]; absent is an error when required, else leaves `out`.
result<void> int_key(const gguf_file& f, const std::string& key, std::int32_t& out, std::int64_t lo, std::int64_t hi, bool required) {
  if (!f.has(key)) {
    if (required) return fail(errc::corrupt_data, "metadata key ", key, " is missing");
    return {};
  }
  auto v = f.get_int(key);
  if (!v) return fail(errc::corrupt_data, "metadata key ", key, " is not an integer");
  if (*v < lo || *v > hi) return fail(errc::corrupt_data, "metadata key ", key, " = ", *v, " is out of range [", lo, ", ", hi, "]");
  out = static_cast<std::int32_t>(*v);
  return {};
}

/// Qwen 3.5's additions, with the keys llama.cpp reads: the Gated DeltaNet shape (ssm.*), which
/// layers are recurrent (a per-layer array, else every full_attention_interval-th layer attends,
/// 4 when absent), and the rotary sections. Text positions give every section the same position,
/// so the interleaved multi-section rotary equals NeoX rotary over rope.dimension_count values.
result<void> read_qwen35(const gguf_file& f, const std::string& a, hparams& h) {
  h.attn_gated = true;
  // The last nextn_predict_layers blocks are multi-token-prediction heads, not part of the model's
  // own pass (llama.cpp runs them only to draft): they are left out.
  std::int32_t nextn = 0;
  if (auto r = int_key(f, a + ".nextn_predict_layers", nextn, 0, h.n_layer - 1, false); !r) return r;
  h.n_layer -= nextn;
  if (auto r = int_key(f, a + ".ssm.conv_kernel", h.ssm_conv_kernel, 1, 64, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.state_size", h.ssm_state, 1, kernels::k_attention_max_head_dim, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.group_count", h.ssm_k_heads, 1, 1024, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.time_step_rank", h.ssm_v_heads, 1, 1024, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.inner_size", h.ssm_inner, 1, 1 << 20, true); !r) return r;
  if (h.ssm_v_heads % h.ssm_k_heads != 0)
    return fail(errc::corrupt_data, a, ".ssm.time_step_rank = ", h.ssm_v_heads, " is not a multiple of ", a, ".ssm.group_count = ", h.ssm_k_heads);
  if (h.ssm_inner != h.ssm_v_heads * h.ssm_state)
    return fail(errc::unsupported, a, ".ssm.inner_size = ", h.ssm_inner, " differs from time_step_rank x state_size (value and key heads of one length)");
  const std::string layers_key = a + ".attention.recurrent_layers";
  if (f.array_size(layers_key)) {
    auto layers = f.get_int_array(layers_key);
    if (!layers || layers->size() < static_cast<std::size_t>(h.n_layer))
      return fail(errc::corrupt_data, "metadata key ", layers_key, " must hold one boolean per layer (", h.n_layer, ")");
    for (int il = 0; il < h.n_layer; ++il) h.recurrent_layers.push_back((*layers)[static_cast<std::size_t>(il)] != 0);
  } else {
    std::int32_t interval = 4;
    if (auto r = int_key(f, a + ".full_attention_interval", interval, 1, 1024, false); !r) return r;
    for (int il = 0; il < h.n_layer; ++il) h.recurrent_layers.push_back((il + 1) % interval != 0);
  }
  return {};
}

/// A head_count_kv array (llama.cpp's per-layer form): a layer with 0 keeps a recurrent state
/// instead of attending, the others must agree on one count.
result<void> read_kv_heads_per_layer(const gguf_file& f, const std::string& a, hparams& h) {
  const std::string key = a + ".attention.head_count_kv";
  auto heads = f.get_int_array(key);
  if (!heads || heads->size() != static_cast<std::size_t>(h.n_layer))
    return fail(errc::corrupt_data, "metadata key ", key, " must hold one count per layer (", h.n_layer, ")");
  h.n_head_kv = 0;
  for (std::int64_t v : *heads) {
    if (v < 0 || v > h.n_head) return fail(errc::corrupt_data, "metadata key ", key, " holds ", v, ", out of range [0, ", h.n_head, "]");
    if (v != 0 && h.n_head_kv != 0 && v != h.n_head_kv)
      return fail(errc::unsupported, "metadata key ", key, " gives attention layers different counts (", h.n_head_kv, " and ", v, ")");
    if (v != 0) h.n_head_kv = static_cast<std::int32_t>(v);
    h.recurrent_layers.push_back(v == 0);
  }
  if (h.n_head_kv == 0) h.n_head_kv = h.n_head;  // no attention layer: any count that divides
  if (h.architecture != arch::granitehybrid && h.has_recurrent())
    return fail(errc::unsupported, "metadata key ", key, " gives a layer no heads, which only granitehybrid reads as recurrent");
  return {};
}

/// Granite 4.0-H's additions, with the keys llama.cpp reads: the Mamba-2 shape (ssm.*; which
/// layers are Mamba-2 came from head_count_kv), the multipliers, and rope.scaling.finetuned as the
/// switch for rotary embeddings (on when absent). The mixture-of-experts variants are not read.
result<void> read_granite_hybrid(const gguf_file& f, const std::string& a, hparams& h) {
  if (auto v = f.get_int(a + ".expert_count"); v && *v > 0)
    return fail(errc::unsupported, "granitehybrid with experts (", a, ".expert_count = ", *v, ") is not supported; the dense FFN variant is");
  if (auto r = int_key(f, a + ".ssm.conv_kernel", h.ssm_conv_kernel, 1, 64, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.state_size", h.ssm_state, 1, 1024, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.group_count", h.ssm_k_heads, 1, 1024, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.time_step_rank", h.ssm_v_heads, 1, 1 << 16, true); !r) return r;
  if (auto r = int_key(f, a + ".ssm.inner_size", h.ssm_inner, 1, 1 << 20, true); !r) return r;
  if (h.ssm_v_heads % h.ssm_k_heads != 0 || h.ssm_inner % h.ssm_v_heads != 0)
    return fail(errc::corrupt_data, a, ".ssm: inner_size ", h.ssm_inner, ", time_step_rank ", h.ssm_v_heads, " and group_count ",
                h.ssm_k_heads, " must each divide the one before");
  if (auto r = positive_float(f, a + ".residual_scale", h.residual_scale); !r) return r;
  if (auto r = positive_float(f, a + ".logit_scale", h.logit_scale); !r) return r;
  if (auto r = positive_float(f, a + ".embedding_scale", h.embed_scale); !r) return r;
  if (auto r = positive_float(f, a + ".attention.scale", h.attn_scale); !r) return r;
  if (f.has(a + ".rope.scaling.finetuned")) {
    auto v = f.get_bool(a + ".rope.scaling.finetuned");
    if (!v) return fail(errc::corrupt_data, "metadata key ", a, ".rope.scaling.finetuned is not a boolean");
    h.use_rope = *v;
  }
  return {};
}

/// The experts' shape: expert_count and expert_used_count (required), and each expert's hidden
/// length (expert_feed_forward_length; absent: feed_forward_length / expert_used_count, as
/// llama.cpp takes it).
result<void> read_experts(const gguf_file& f, const std::string& a, hparams& h) {
  if (auto r = int_key(f, a + ".expert_count", h.n_expert, 1, 4096, true); !r) return r;
  if (auto r = int_key(f, a + ".expert_used_count", h.n_expert_used, 1, h.n_expert, true); !r) return r;
  h.n_ff_exp = h.n_ff / h.n_expert_used;
  if (auto r = int_key(f, a + ".expert_feed_forward_length", h.n_ff_exp, 1, 1 << 20, false); !r) return r;
  if (h.n_ff_exp < 1) return fail(errc::corrupt_data, a, ".expert_feed_forward_length is missing and feed_forward_length is too short");
  return {};
}

/// gpt-oss's additions: its experts (a softmax over the chosen logits, the clamped SwiGLU), and
/// every other layer sliding through a window (a period of 2: the even layers slide), rotating
/// with the global base unless the file gives one.
result<void> read_gpt_oss(const gguf_file& f, const std::string& a, hparams& h) {
  if (auto r = read_experts(f, a, h); !r) return r;
  h.router_softmax_after_topk = true;
  h.swiglu_oai = true;
  if (!f.has(a + ".attention.sliding_window")) return fail(errc::corrupt_data, "metadata key ", a, ".attention.sliding_window is missing");
  if (auto r = read_sliding_layers(f, a, h, 2); !r) return r;
  return positive_float(f, a + ".rope.freq_base_swa", h.rope_freq_base_swa);
}

/// YaRN scaling, with the keys and defaults llama.cpp reads: the factor (freq_scale = 1 / factor),
/// the original context (context_length when absent), the ramp's betas, and the attention factor
/// that llama.cpp derives so that the magnitude scaling of the angles is 1 + 0.1 ln(factor).
result<void> read_yarn(const gguf_file& f, const std::string& a, hparams& h) {
  const std::string p = a + ".rope.scaling.";
  float factor = 1.0f, log_mul = 0.0f, attn = 1.0f;
  if (auto r = positive_float(f, p + "factor", factor); !r) return r;
  h.rope_freq_scale = 1.0f / factor;
  h.yarn.n_ctx_orig = h.n_ctx_train;
  if (auto r = int_key(f, p + "original_context_length", h.yarn.n_ctx_orig, 1, 1 << 24, false); !r) return r;
  h.yarn.ext_factor = 1.0f;
  if (auto r = nonnegative_float(f, p + "yarn_ext_factor", h.yarn.ext_factor); !r) return r;
  if (auto r = positive_float(f, p + "yarn_beta_fast", h.yarn.beta_fast); !r) return r;
  if (auto r = positive_float(f, p + "yarn_beta_slow", h.yarn.beta_slow); !r) return r;
  if (auto r = nonnegative_float(f, p + "yarn_log_multiplier", log_mul); !r) return r;
  if (auto r = positive_float(f, p + "attn_factor", attn); !r) return r;
  auto mscale = [](float s, float m) { return s <= 1.0f ? 1.0f : 0.1f * m * std::log(s) + 1.0f; };
  h.yarn.attn_factor = attn;
  if (h.yarn.ext_factor != 0) {
    const float m = log_mul != 0 ? mscale(factor, 1.0f) / mscale(factor, log_mul) : mscale(factor, 1.0f);
    h.yarn.attn_factor *= m / (1.0f + 0.1f * std::log(factor));
  }
  return {};
}

}  // namespace

result<hparams> hparams::from_gguf(const gguf_file& f) {
  hparams h;
  std::string a(f.architecture());
  if (a.empty()) return fail(errc::corrupt_data, "general.architecture is missing");
  if (a == "llama") h.architecture = arch::llama;
  else if (a == "qwen2") h.architecture = arch::qwen2;
  else if (a == "qwen3") h.architecture = arch::qwen3;
  else if (a == "gemma2") h.architecture = arch::gemma2;
  else if (a == "gemma3") h.architecture = arch::gemma3;
  else if (a == "phi3") h.architecture = arch::phi3;
  else if (a == "qwen35") h.architecture = arch::qwen35;
  else if (a == "qwen3moe") h.architecture = arch::qwen3moe;
  else if (a == "gpt-oss") h.architecture = arch::gpt_oss;
  else if (a == "granitehybrid") h.architecture = arch::granitehybrid;
  else return fail(errc::unsupported, "architecture '", a, "' is not supported (llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, gpt-oss, granitehybrid are)");

  auto need_int = [&](const std::string& suffix, std::int32_t& out, std::int64_t lo, std::int64_t hi) -> result<void> {
    std::string key = a + "." + suffix;
    auto v = f.get_int(key);
    if (!v) return fail(errc::corrupt_data, "metadata key ", key, " is missing or not an integer");
    if (*v < lo || *v > hi) return fail(errc::corrupt_data, "metadata key ", key, " = ", *v, " is out of range [", lo, ", ", hi, "]");
    out = static_cast<std::int32_t>(*v);
    return {};
  };
  if (auto r = need_int("embedding_length", h.n_embd, 1, 1 << 16); !r) return std::move(r).err();
  if (auto r = need_int("block_count", h.n_layer, 1, 1024); !r) return std::move(r).err();
  if (auto r = need_int("feed_forward_length", h.n_ff, 1, 1 << 20); !r) return std::move(r).err();
  if (auto r = need_int("attention.head_count", h.n_head, 1, 1024); !r) return std::move(r).err();
  h.n_head_kv = h.n_head;
  if (f.array_size(a + ".attention.head_count_kv")) {
    if (auto r = read_kv_heads_per_layer(f, a, h); !r) return std::move(r).err();
  } else if (f.has(a + ".attention.head_count_kv")) {
    if (auto r = need_int("attention.head_count_kv", h.n_head_kv, 1, h.n_head); !r) return std::move(r).err();
  }
  if (h.n_head % h.n_head_kv != 0)
    return fail(errc::corrupt_data, a, ".attention.head_count_kv = ", h.n_head_kv, " does not divide head_count = ", h.n_head);
  h.head_dim = h.n_embd / h.n_head;
  if (f.has(a + ".attention.key_length")) {
    if (auto r = need_int("attention.key_length", h.head_dim, 1, 4096); !r) return std::move(r).err();
    if (auto v = f.get_int(a + ".attention.value_length"); v && *v != h.head_dim)
      return fail(errc::unsupported, a, ".attention.value_length ", *v, " differs from key_length ", h.head_dim);
  } else if (h.n_embd % h.n_head != 0) {
    return fail(errc::corrupt_data, a, ".embedding_length = ", h.n_embd, " is not a multiple of ", a, ".attention.head_count = ",
                h.n_head, " and no ", a, ".attention.key_length is given");
  }
  h.n_rot = h.head_dim;
  if (f.has(a + ".rope.dimension_count")) {
    if (auto r = need_int("rope.dimension_count", h.n_rot, 2, h.head_dim); !r) return std::move(r).err();
    if (h.n_rot % 2 != 0) return fail(errc::corrupt_data, a, ".rope.dimension_count must be even");
  }
  h.n_ctx_train = 4096;
  if (f.has(a + ".context_length")) {
    if (auto r = need_int("context_length", h.n_ctx_train, 1, 1 << 24); !r) return std::move(r).err();
  }
  if (auto r = positive_float(f, a + ".rope.freq_base", h.rope_freq_base); !r) return std::move(r).err();
  // Linear scaling; gemma3 files from older converters give the factor alone, which llama.cpp
  // also takes as linear.
  const auto scaling = f.get_string(a + ".rope.scaling.type");
  if ((scaling && *scaling == "linear") || (!scaling && h.architecture == arch::gemma3)) {
    float factor = 1.0f;
    if (auto r = positive_float(f, a + ".rope.scaling.factor", factor); !r) return std::move(r).err();
    h.rope_freq_scale = 1.0f / factor;
  } else if (scaling && *scaling == "yarn") {
    if (auto r = read_yarn(f, a, h); !r) return std::move(r).err();
  }
  h.rope_freq_base_swa = h.rope_freq_base;
  h.rope_freq_scale_swa = h.rope_freq_scale;
  const std::string eps_key = a + ".attention.layer_norm_rms_epsilon";
  if (!f.has(eps_key)) return fail(errc::corrupt_data, "metadata key ", eps_key, " is missing");
  if (auto r = positive_float(f, eps_key, h.norm_eps, 1.0); !r) return std::move(r).err();

  if (h.head_dim > kernels::k_attention_max_head_dim)
    return fail(errc::unsupported, a, ".attention.key_length = ", h.head_dim, " exceeds the longest head supported (",
                kernels::k_attention_max_head_dim, ")");

  // llama.cpp's convention: adjacent-pair rotation for llama and granitehybrid, NeoX halves for the others.
  h.rope_neox = h.architecture != arch::llama && h.architecture != arch::granitehybrid;
  h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
  if (h.architecture == arch::gemma2) {
    // Gemma 2 27B (46 layers) was trained with query_pre_attn_scalar = n_embd / n_head, the
    // smaller models with the head length.
    if (h.n_layer == 46) h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.n_embd / h.n_head));
    if (auto r = need_int("attention.sliding_window", h.sliding_window, 1, 1 << 24); !r) return std::move(r).err();
    // Even layers slide, odd layers attend globally.
    for (int il = 0; il < h.n_layer; ++il) h.sliding_layers.push_back(il % 2 == 0);
    // The soft-caps Gemma 2 was trained with, unless the file says otherwise (0 turns one off).
    h.attn_softcap = 50.0f;
    h.final_softcap = 30.0f;
    if (auto r = nonnegative_float(f, a + ".attn_logit_softcapping", h.attn_softcap); !r) return std::move(r).err();
    if (auto r = nonnegative_float(f, a + ".final_logit_softcapping", h.final_softcap); !r) return std::move(r).err();
    h.embed_scale = std::sqrt(static_cast<float>(h.n_embd));
  } else if (h.architecture == arch::gemma3) {
    if (auto r = read_gemma3(f, a, h); !r) return std::move(r).err();
  } else if (h.architecture == arch::qwen35) {
    if (auto r = read_qwen35(f, a, h); !r) return std::move(r).err();
  } else if (h.architecture == arch::qwen3moe) {
    if (auto r = read_experts(f, a, h); !r) return std::move(r).err();
  } else if (h.architecture == arch::gpt_oss) {
    if (auto r = read_gpt_oss(f, a, h); !r) return std::move(r).err();
  } else if (h.architecture == arch::granitehybrid) {
    if (auto r = read_granite_hybrid(f, a, h); !r) return std::move(r).err();
  }

  auto tokens = f.array_size("tokenizer.ggml.tokens");
  if (f.has(a + ".vocab_size")) {
    if (auto r = need_int("vocab_size", h.n_vocab, 1, std::numeric_limits<std::int32_t>::max()); !r) return std::move(r).err();
  }
  else if (tokens) h.n_vocab = static_cast<std::int32_t>(*tokens);
  const gguf_tensor* embd = f.find_tensor("token_embd.weight");
  if (!embd) return fail(errc::corrupt_data, "tensor 'token_embd.weight' is missing");
  if (h.n_vocab == 0) h.n_vocab = static_cast<std::int32_t>(embd->ne[1]);
  if (embd->ne[1] != h.n_vocab)
    return fail(errc::corrupt_data, "tensor 'token_embd.weight' has ", embd->ne[1], " rows but the vocabulary has ", h.n_vocab, " tokens");
  // Every id the model can produce must have a token, and every token an embedding row.
  if (tokens && *tokens != static_cast<std::uint64_t>(h.n_vocab))
    return fail(errc::corrupt_data, "metadata key tokenizer.ggml.tokens has ", *tokens, " entries but the model's vocabulary has ", h.n_vocab,
                " (token_embd.weight rows)");
  return h;
}

}  // namespace strata::model
