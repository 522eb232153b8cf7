#pragma once
// Decode matrix-vector products on the GPU: y = W x for 1 to k_matvec_max_batch activation rows,
// with W uploaded once in its GGUF type and dequantized in registers.
//
// Layout on the device. The kernels read each weight row with 16-byte loads, so the block types
// whose GGUF blocks are not a multiple of 16 bytes are split at upload into the quants (rows of
// 16-byte multiples) and a side array of their f16 scales; the bytes per weight stay those of
// the GGUF file:
//   f16, bf16, q4_K (144 B), q5_K (176 B): as in the file, q = the rows, no side array;
//   q8_0: q = the 32 levels of each block, s = its scale d;
//   q4_0: q = the 16 nibble bytes of each block, s = d;     q4_1: q = nibbles, s = (d, m);
//   q6_K: q = ql | qh | scales of each super-block (208 B), s = d.
//
// Activations. Float weights take f32 x. The quantized types take x quantized to 8 bits per 32
// values (act_q8: levels, and per block its scale d and d * sum of its levels), made once by
// quantize_act and shared by every product with the same x (q, k and v; gate and up); the dot of
// a weight block with it is integer (dp4a) with one float multiply per block, as on the CPU.

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device.hpp"
#include "kernels/types.hpp"

namespace strata::kernels::cuda {

/// Most activation rows one matvec takes (decode of a small batch).
constexpr int k_matvec_max_batch = 8;
/// Most products one matvec_many launch takes.
constexpr int k_matvec_max_outputs = 4;

/// A weight matrix on the device: `rows` rows of `k` values of type `type` (layout above).
struct device_matrix {
  dtype type = dtype::f16;
  std::int64_t rows = 0;
  std::int64_t k = 0;
  device_buffer q;
  device_buffer s;
  std::size_t q_row_bytes = 0;
  std::size_t s_row_bytes = 0;
  /// The bytes one product reads: the weights as stored.
  std::size_t bytes() const { return q.bytes() + s.bytes(); }
};

/// Whether matvec takes weights of this type, and the multiple k must be of for it.
bool matvec_supports(dtype t);
std::int64_t matvec_k_multiple(dtype t);
/// Uploads `rows` GGUF rows of k values of type t (host memory, row_bytes(t, k) each) into the
/// device layout. Throws std::invalid_argument for an unsupported type or k. Waits for the copy,
/// so the host rows may go as soon as it returns.
device_matrix upload_matrix(dtype t, const void* rows, std::int64_t n_rows, std::int64_t k, cudaStream_t stream);

/// Up to k_matvec_max_batch activation rows of k values quantized for the quantized types.
struct act_q8 {
  std::int64_t k = 0;
  int max_rows = 0;
  device_buffer q;   // int8 levels, row after row (k each)
  device_buffer ds;  // float2 per block of 32: (d, d * sum of the levels)
};
act_q8 make_act_q8(std::int64_t k, int max_rows);
/// Quantizes n rows of x (f32, device, n x k) into a (n <= a.max_rows, k == a.k).
void quantize_act(const float* x, int n, act_q8& a, cudaStream_t stream);

/// y[b * w.rows + r] = sum_j W[r][j] * x[b][j] for b < n (1..k_matvec_max_batch). Float types
/// read x (f32, device, n x k); the quantized ones read xq, which quantize_act made from that x
/// (x may then be null). y is f32 on the device.
void matvec(const device_matrix& w, const float* x, const act_q8* xq, int n, float* y, cudaStream_t stream);

/// One product of matvec_many: y = W x, laid out as matvec's; with `add`, y += W x (the residual
/// add after a layer's last product, in the same launch: y + (W x) rounds as an add kernel would).
struct matvec_out {
  const device_matrix* w = nullptr;
  float* y = nullptr;
  bool add = false;
};
/// matvec for up to k_matvec_max_outputs matrices of one type and k against the same x (a
/// layer's q, k and v; its gate and up) in one launch: the small ones no longer pay a launch and
/// a memory latency each. Each y gets exactly what matvec would give it.
/// (A pointer and a count rather than a span: the .cu files compile as C++17.)
void matvec_many(const matvec_out* outs, int count, const float* x, const act_q8* xq, int n, cudaStream_t stream);

/// The rotary embedding's angles (rope, rope_store_kv, matvec_many_rope): token t's first n_rot
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

/// RoPE (the normal layout: pairs 2i, 2i + 1 of each head) and the KV page writes of one decode
/// row, in the epilogue of matvec_many: the products' rows of matrix `rotate` bits turn as
/// rope_store_kv turns q and k, and matrix to_k's (to_v's) rows are then also written as f16 into
/// the K (V) page slot slots[0]. The same arithmetic as rope_store_kv, so the same bits; taken
/// only where matvec_rope_supported says so (the caller runs rope_store_kv otherwise).
struct matvec_rope {
  rope_args angles;  // the same as rope_store_kv's (pos[0]: the row's position); neox must be false
  int head_dim = 0;
  unsigned rotate = 0;   // bit i: matrix i's rows turn
  int to_k = -1, to_v = -1;  // the matrix whose rows go into the K / V pages (-1: none)
  const std::int32_t* slots = nullptr;  // device: the row's page slot
  void* k_pages = nullptr;
  void* v_pages = nullptr;
  int kv_dim = 0;
};
/// Whether matvec_many_rope takes weights of this type and n rows: one row, and a type whose warps
/// take two rows of one unit (the pair of a rotation in one warp; its own kernel instance, so the
/// other products' kernels stay as they were).
bool matvec_rope_supported(dtype t, int n);
void matvec_many_rope(const matvec_out* outs, int count, const act_q8* xq, const matvec_rope& rope, cudaStream_t stream);

}  // namespace strata::kernels::cuda
