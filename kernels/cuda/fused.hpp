#pragma once
// Fused steps of a layer on the GPU: each does in one launch what two or three kernels of ops.hpp
// and kv_store.hpp do in a row, with the same arithmetic, so the results are the same bit for bit.
// A decode step is a few microseconds of work per small kernel, so every launch saved counts.

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/matvec.hpp"
#include "kernels/cuda/ops.hpp"

namespace strata::kernels::cuda {

/// The residual add and the next norm: x += r, then rms_norm_quantize(x) into y (may be null) and
/// xq (n <= xq.max_rows, dim == xq.k). The same as add then rms_norm_quantize.
void add_rms_norm_quantize(float* x, const float* r, const float* weight, float* y, int n, int dim, float eps, act_q8& xq,
                           cudaStream_t stream);

/// RoPE of q (n x n_head heads) and k (n x n_head_kv heads) in place, then k and v of each row
/// into its page slot: the same as rope(q), rope(k) and store_kv_f16 (store_kv_q8_0 for the rows
/// of q8_0 pages). A row goes to its f16 slot slots[r] when that is 0 or more, else to its q8_0
/// slot slots_q8[r] when those are given and it is 0 or more (a step may hold sequences of both
/// formats); a row with neither is turned but not stored.
struct rope_kv_args {
  float* q = nullptr;
  float* k = nullptr;
  const float* v = nullptr;
  int n = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  const std::int32_t* slots = nullptr;  // device, per row: f16 slot, or -1
  void* k_pages = nullptr;
  void* v_pages = nullptr;
  const std::int32_t* slots_q8 = nullptr;  // device, per row: q8_0 slot, or -1 (may be null: none)
  void* k_pages_q8 = nullptr;
  void* v_pages_q8 = nullptr;
};
void rope_store_kv(const rope_kv_args& a, const rope_args& rope, cudaStream_t stream);

/// g = silu(g) * u over n rows of dim values, and the rows quantized into xq for the next matvec:
/// the same as swiglu then quantize_act.
void swiglu_quantize(float* g, const float* u, int n, int dim, act_q8& xq, cudaStream_t stream);

}  // namespace strata::kernels::cuda
