#pragma once
// Internal to strata synth (synth.cpp, synth_granite.cpp): the tensors it plans, and the pieces of
// the hybrid layouts that more than one architecture's planning shares.

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/types.hpp"
#include "src/common/error.hpp"
#include "src/model/gguf_writer.hpp"
#include "src/model/synth.hpp"

namespace strata::model::synth_layout {

// ssm_a: a recurrent layer's per-head decay rate (negative); conv: the short convolution's taps.
// router: a mixture of experts' gate (ffn_gate_inp), which llama.cpp's quantizer keeps in f32;
// sink: gpt-oss's per-head attention sinks (logits of the order of the scores).
enum class role { embedding, output, norm, bias, weight, ssm_a, conv, router, sink };

struct planned_tensor {
  std::string name;
  std::vector<std::int64_t> ne;
  role kind;
  kernels::dtype type = kernels::dtype::f32;
};

/// Whether layer il of a hybrid (qwen35, granitehybrid) is recurrent: every attn_interval-th
/// layer attends.
inline bool hybrid_recurrent(const synth_options& o, int il) { return (il + 1) % o.attn_interval != 0; }

/// The hybrids' --ssm-conv and --attn-interval.
result<void> validate_conv_and_period(const synth_options& o);

/// granitehybrid: a layer's tensors, the options' limits, and the metadata keys (head_count_kv
/// per layer included).
void plan_granite_layer(const synth_options& o, int il, int head_dim, std::vector<planned_tensor>& t);
result<void> validate_granite(const synth_options& o);
void write_granite_keys(const synth_options& o, int head_dim, gguf_writer& w);

}  // namespace strata::model::synth_layout
