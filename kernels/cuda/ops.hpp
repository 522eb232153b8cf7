#pragma once
// The element-wise and row operations of a layer on the GPU, f32, on device pointers, queued on
// a stream: the same functions as kernels/ops.hpp.

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cuda/matvec.hpp"

namespace strata::kernels::cuda {

/// For each of n rows of `dim` values: y = x / rms(x) * weight (weight may be null). y may be x.
void rms_norm(const float* x, const float* weight, float* y, int n, int dim, float eps, cudaStream_t stream);

/// rms_norm and quantize_act in one launch: the n rows (n <= xq.max_rows, dim == xq.k) are
/// normalized and quantized for the next matvecs; y (may be null) also gets the f32 rows, for
/// float weights. The same levels and scales as the two calls, bit for bit.
void rms_norm_quantize(const float* x, const float* weight, float* y, int n, int dim, float eps, act_q8& xq,
                       cudaStream_t stream);

/// y = a + b, n values (the residual add; y may be a or b).
void add(const float* a, const float* b, float* y, std::int64_t n, cudaStream_t stream);

/// freq_base^(-2i / n_rot) for i < n_rot / 2, computed as the CPU's rope_angles does, so that
/// both rotate by the same angles. Upload it once per model.
std::vector<float> rope_inv_freq(int n_rot, float freq_base);

/// In place, the rotary embedding of x (n_tokens x n_heads x head_dim): token t's first n_rot
/// dimensions of each head turn by theta_i = pos[t] * freq_scale * inv_freq[i] / factors[i]
/// (factors may be null: all 1). Normal layout rotates pairs (2i, 2i + 1), NeoX (i, i + n_rot / 2).
/// pos, inv_freq and factors are device arrays.
struct rope_args {
  const std::int32_t* pos = nullptr;
  const float* inv_freq = nullptr;
  const float* factors = nullptr;
  float freq_scale = 1.0f;
  int n_rot = 0;
  bool neox = false;
};
void rope(float* x, int n_tokens, int n_heads, int head_dim, const rope_args& a, cudaStream_t stream);

/// out[i] = silu(gate[i]) * up[i] for i < n (out may be gate or up).
void swiglu(const float* gate, const float* up, float* out, std::int64_t n, cudaStream_t stream);

}  // namespace strata::kernels::cuda
