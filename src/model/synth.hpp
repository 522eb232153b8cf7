#pragma once
// synthesize(): writes a random-weight model in the GGUF layout llama.cpp's converter writes for
// its architecture (tensor names, shapes, metadata keys, per-tensor quantization mix), with the
// tokenizer of a vocabulary file or the built-in one. Deterministic for a given seed.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "src/common/error.hpp"

namespace strata::model {

struct synth_options {
  std::string arch;             // llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen35, qwen3moe, gpt-oss, granitehybrid
  int layers = 0;
  int hidden = 0;               // embedding length
  int heads = 0;
  int kv_heads = 0;
  int ffn = 0;                  // feed-forward length
  int head_dim = 0;             // 0: hidden / heads
  std::string vocab;            // a GGUF path, or "builtin"
  std::string type = "f16";     // f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q4_k_m q5_k_m q6_k mxfp4_moe
  std::int64_t ctx = 32768;     // context length
  std::uint64_t seed = 0;
  std::optional<bool> tied;     // output shares the embeddings; default per architecture
  std::string name;             // general.name; default "strata-synth-<arch>"
  // qwen35: the Gated DeltaNet layers' shape (0: derived) and the period of full attention.
  // granitehybrid: the Mamba-2 layers' state per channel (default 128), groups (ssm_k_heads,
  // default 1) and heads (ssm_v_heads, default 2 x hidden / 64); d_inner is 2 x hidden.
  int ssm_state = 0;            // key/value length per delta-rule head; 0: min(head length, 128)
  int ssm_k_heads = 0;          // query/key heads; 0: heads / 2 (heads when odd)
  int ssm_v_heads = 0;          // value heads; 0: heads
  int ssm_conv = 4;             // convolution length
  int attn_interval = 4;        // every attn_interval-th layer attends in full
  // Mixtures of experts (qwen3moe, gpt-oss): the experts per layer, those each token uses, and each
  // expert's hidden length (0: ffn / experts_used).
  int experts = 8;
  int experts_used = 2;
  int expert_ffn = 0;
  std::filesystem::path out;
};

/// Called after each tensor: (tensors done, tensor count, bytes written, total bytes).
using progress_callback = std::function<void(std::size_t, std::size_t, std::uint64_t, std::uint64_t)>;

/// Checks the options; the message names the flag that is wrong.
result<void> validate(const synth_options& o);

/// Validates, then writes o.out (through a ".part" file, renamed when complete).
result<void> synthesize(const synth_options& o, const progress_callback& progress = {});

}  // namespace strata::model
