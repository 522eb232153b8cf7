#pragma once
// Element-wise and row operations of the transformer layers (f32).

#include <cstdint>

#include "kernels/quants.hpp"  // fp16_to_fp32, fp32_to_fp16, bf16_to_fp32, fp32_to_bf16

namespace strata::kernels {

/// y = x / rms(x) * weight (weight may be null: no scaling). y may equal x.
void rms_norm(const float* x, const float* weight, float* y, std::int64_t n, float eps);
/// Rotary embedding in two steps, so that a token's queries and keys share one set of angles:
/// cs[2i], cs[2i+1] = cos, sin of theta_i = pos * freq_scale * freq_base^(-2i / n_rot) / factors[i]
/// for i < n_rot / 2 (factors may be null: all 1) ...
void rope_angles(std::int32_t pos, int n_rot, float freq_base, float freq_scale, const float* factors, float* cs);
/// YaRN (gpt-oss): the rotary frequencies that turn within the original context's length keep
/// their unscaled angle, those that turn slowly take the scaled one, with a linear ramp between
/// (over the dimension pairs [low, high] of llama.cpp's rope_yarn_corr_dims); cos and sin are
/// multiplied by attn_factor * (1 + 0.1 ln(1 / freq_scale)), which sharpens the attention.
struct yarn_params {
  float ext_factor = 0.0f;  // 0: plain rope_angles
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  std::int32_t n_ctx_orig = 0;
  bool operator==(const yarn_params&) const = default;
};
void rope_angles_yarn(std::int32_t pos, int n_rot, float freq_base, float freq_scale, const yarn_params& y, float* cs);
/// ... and, in place, the rotation of the first n_rot dimensions of each of n_heads heads of
/// head_dim values by them. Normal layout rotates adjacent pairs (2i, 2i+1); NeoX rotates
/// (i, i + n_rot/2).
void rope_rotate(float* x, int n_heads, int head_dim, int n_rot, const float* cs, bool neox);
/// In place, numerically stable; returns log(sum(exp(x))) of the input.
float softmax(float* x, std::int64_t n);
void silu(float* x, std::int64_t n);
/// GELU, tanh approximation.
void gelu(float* x, std::int64_t n);
/// x = cap * tanh(x / cap)
void soft_cap(float* x, std::int64_t n, float cap);
void mul(float* y, const float* a, const float* b, std::int64_t n);
void add(float* y, const float* a, const float* b, std::int64_t n);
void scale(float* x, std::int64_t n, float s);
/// f32 to f16 (round to nearest even) and back, for the KV cache.
void convert_row_to_f16(const float* src, std::uint16_t* dst, std::int64_t n);
void convert_row_from_f16(const std::uint16_t* src, float* dst, std::int64_t n);

}  // namespace strata::kernels
