#pragma once
// The kernels of a Gated DeltaNet layer (linear attention with a delta-rule state): the short
// causal convolution over its q, k, v channels, and the gated delta rule itself, token by token
// (decode) or in chunks (prefill).
//
// One head's state is a dim x dim matrix M (row j: value index j, along key index i), updated at
// each row t of a sequence with log-decay g_t <= 0, strength beta_t, and unit-length q_t, k_t:
//
//   M <- exp(g_t) M;   u_t = beta_t (v_t - M k_t);   M <- M + u_t k_t^T;   o_t = scale * M q_t
//
// The chunked form computes the same outputs and final state from the state at the chunk's start
// and the chunk's rows alone: with G_t the running sum of g within the chunk,
//
//   u_t = beta_t (v_t - e^{G_t} M0 k_t - sum_{s<t} e^{G_t - G_s} (k_s . k_t) u_s)
//   o_t = scale (e^{G_t} M0 q_t + sum_{s<=t} e^{G_t - G_s} (k_s . q_t) u_s)
//   M   = e^{G_last} M0 + sum_s e^{G_last - G_s} u_s k_s^T
//
// so the state is read and written once per chunk instead of three times per row. The vector
// loops go through a kernel table (dot, axpy, silu): kernels_for(scalar) is the reference.

#include <cstddef>
#include <cstdint>

#include "kernels/simd.hpp"

namespace strata::kernels {

/// One head's rows of one sequence. Row t reads q, k, v at q + t * qkv_stride (dim values each),
/// its log-decay and strength at g[t * gb_stride], beta[t * gb_stride], and writes its output at
/// out + t * out_stride.
struct delta_rule_rows {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t qkv_stride = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
  std::int64_t gb_stride = 0;
  float* out = nullptr;
  std::int64_t out_stride = 0;
  std::int64_t n = 0;
  /// The sequence position of row 0: delta_rule_chunked's chunks start at multiples of its chunk
  /// length in these positions, not at row 0, so that where a step's rows begin does not change
  /// the sums (see delta_rule_chunk_for).
  std::int64_t pos = 0;
};

/// The rows of a chunk in delta_rule_chunked, at most.
constexpr int k_delta_rule_max_chunk = 64;

/// The recurrence, row by row; state (dim x dim) is read and left updated.
void delta_rule_recurrent(const kernel_table& kt, const delta_rule_rows& r, int dim, float scale, float* state);

/// The chunk length for sequences whose prefix cache cuts them at multiples of block_tokens (the
/// KV block, where snapshots of the state are taken): the largest length up to
/// k_delta_rule_max_chunk that divides it, so that a sequence resumed from a snapshot and one
/// computed from its start cut their chunks at the same positions (the scheduler ends their
/// steps at multiples of it too).
int delta_rule_chunk_for(int block_tokens);

/// Floats of the workspace delta_rule_chunked needs for heads of `dim` values.
std::size_t delta_rule_work_floats(int dim);

/// The same outputs and state (up to the order of float sums) in chunks of `chunk` rows (1 ..
/// k_delta_rule_max_chunk) that start at positions r.pos + t that are multiples of `chunk`: rows
/// that come in steps whose ends fall on such multiples get the same bits however the steps are
/// cut. `work` holds delta_rule_work_floats(dim) floats.
void delta_rule_chunked(const kernel_table& kt, const delta_rule_rows& r, int dim, float scale, float* state, float* work,
                        int chunk = k_delta_rule_max_chunk);

/// Depthwise causal convolution of channels [c0, c1) of n rows of `channels` values (row t at
/// x + t * x_stride) with `taps` weights per channel (taps_w: taps x channels, tap-major, the last
/// tap on the current row), continuing from `state`, the previous taps - 1 input rows (oldest
/// first, channels values each), whose [c0, c1) columns are left holding the last taps - 1 input
/// rows. out (row t at out + t * out_stride) must not alias x. Sums run from the oldest tap, as
/// llama.cpp's ssm_conv does. Disjoint channel ranges may run at once.
void causal_conv(const float* x, std::int64_t x_stride, std::int64_t n, std::int64_t channels, std::int64_t c0, std::int64_t c1,
                 const float* taps_w, int taps, float* state, float* out, std::int64_t out_stride);

/// taps_w for causal_conv from GGUF's ssm_conv1d layout (channels x taps, taps fastest).
void conv_taps_major(const float* w, std::int64_t channels, int taps, float* taps_w);

/// In place: each of n_heads runs of dim values scaled to unit length, x / sqrt(sum x^2 + eps).
void l2_norm_heads(float* x, int n_heads, int dim, float eps);

}  // namespace strata::kernels
