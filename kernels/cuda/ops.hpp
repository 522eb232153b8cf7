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

/// In place, the rotary embedding of x (n_tokens x n_heads x head_dim), by the angles of
/// rope_args (matvec.hpp).
void rope(float* x, int n_tokens, int n_heads, int head_dim, const rope_args& a, cudaStream_t stream);

/// out[i] = silu(gate[i]) * up[i] for i < n (out may be gate or up).
void swiglu(const float* gate, const float* up, float* out, std::int64_t n, cudaStream_t stream);

}  // namespace strata::kernels::cuda
