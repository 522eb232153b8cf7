#pragma once
// The selective scan of a Mamba-2 layer (llama.cpp's ggml_ssm_scan with a scalar decay per head).
//
// One head's state S is head_dim rows of d_state values. At row t of a sequence, with the step
// dt_t > 0 (already through softplus), the head's decay rate a < 0, the head's inputs x_t
// (head_dim values) and its group's B_t and C_t (d_state values each):
//
//   S <- exp(dt_t a) S + dt_t x_t B_t^T;   y_t = S C_t
//
// The chunked (state-space dual) form gives the same outputs and final state from the state at the
// chunk's start and the chunk's rows: with G_t the running sum of dt_s a within the chunk,
//
//   y_t = e^{G_t} S0 C_t + sum_{s<=t} e^{G_t - G_s} (C_t . B_s) dt_s x_s
//   S   = e^{G_last} S0 + sum_s e^{G_last - G_s} dt_s x_s B_s^T
//
// so the state is read and written once per chunk instead of once per row, and the work is dot
// products and axpys of the kernel table (kernels_for(scalar) is the reference).

#include <cstddef>
#include <cstdint>

#include "kernels/simd.hpp"

namespace strata::kernels {

/// One head's rows of one sequence: row t reads x + t * x_stride (head_dim values), B and C at
/// B + t * bc_stride and C + t * bc_stride (d_state values each), its step at dt[t * dt_stride],
/// and writes y + t * y_stride (head_dim values).
struct ssm_scan_rows {
  const float* x = nullptr;
  std::int64_t x_stride = 0;
  const float* B = nullptr;
  const float* C = nullptr;
  std::int64_t bc_stride = 0;
  const float* dt = nullptr;
  std::int64_t dt_stride = 0;
  float* y = nullptr;
  std::int64_t y_stride = 0;
  std::int64_t n = 0;
  /// The sequence position of row 0: ssm_scan_chunked's chunks start at multiples of its chunk
  /// length in these positions (as delta_rule_chunked's: kernels/delta_rule.hpp).
  std::int64_t pos = 0;
};

/// The rows of a chunk in ssm_scan_chunked, at most.
constexpr int k_ssm_scan_max_chunk = 64;

/// The recurrence, row by row, as llama.cpp computes it; state (head_dim x d_state) is read and
/// left updated.
void ssm_scan_recurrent(const ssm_scan_rows& r, int head_dim, int d_state, float a, float* state);

/// Floats of the workspace ssm_scan_chunked needs.
std::size_t ssm_scan_work_floats(int head_dim);

/// The same outputs and state (up to the order of float sums) in chunks of `chunk` rows (1 ..
/// k_ssm_scan_max_chunk) that start at positions r.pos + t that are multiples of `chunk`; `work`
/// holds ssm_scan_work_floats(head_dim) floats.
void ssm_scan_chunked(const kernel_table& kt, const ssm_scan_rows& r, int head_dim, int d_state, float a, float* state, float* work,
                      int chunk = k_ssm_scan_max_chunk);

}  // namespace strata::kernels
