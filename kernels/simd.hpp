#pragma once
// The per-CPU kernel table: the scalar reference and the AVX2 / AVX-512 variants of the inner
// loops, picked once at start from cpuid (STRATA_ISA=scalar|avx2|avx512 forces a lower level).
//
// Two product paths sit behind matmul():
//  - row dots (GEMV, small m): a weight row in its GGUF layout against one activation row. For
//    quantized weights the activations are first quantized to 8 bits (act_format), and the dot
//    runs on integers with one float multiply per block, as the GGUF block scales require;
//    f32/f16/bf16 weights take f32 activations.
//  - row GEMMs (large m): the same products, blocked so that each decoded weight serves several
//    activation rows (and each activation several weight rows). f32/f16/bf16 weights are
//    expanded to f32 tiles and multiplied with FMA. Both paths run the same operations for each
//    output, so a row gets the same bits alone or in a batch of any size.
// Where a level has a packed kernel for a type (packed_gemm), matrices packed at load in 16-row
// groups (kernels/packed_x16.hpp) take it for every m instead, decode included.

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/types.hpp"

namespace strata::kernels {

enum class simd_level { scalar, avx2, avx512 };

/// How activations are quantized for a weight type's row dot.
enum class act_format {
  f32,     // not quantized (f32, f16, bf16 weights)
  q8_32,   // int8 with one f32 scale per 32 values, sums per 32 (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4)
  q8_256,  // int8 with one f32 scale per 256 values, sums per 16 (q4_K, q5_K, q6_K weights)
};
act_format act_format_for(dtype wt);

/// One activation row as the row dots read it. For act_format::f32 only `f` is set; otherwise
/// x[j] ~ qs[j] * d[j / group] and sums[b] = sum of qs over the b-th run of sum_group values.
struct act_row {
  const float* f = nullptr;
  const std::int8_t* qs = nullptr;
  const float* d = nullptr;
  const std::int32_t* sums = nullptr;
};

/// Bytes one quantized activation row of k values takes in a buffer (64-byte multiple).
std::size_t act_row_bytes(act_format fmt, std::int64_t k);
/// Quantizes x[0..k) into buf (act_row_bytes(fmt, k) bytes, 64-byte aligned) and returns the view.
/// k is a multiple of the format's group. Round to nearest; the scale is max|x| / 127.
act_row quantize_activations(act_format fmt, const float* x, std::int64_t k, void* buf);
struct kernel_table;
/// The same with a kernel level's quantizer (every level gives the same bytes).
act_row quantize_activations(const kernel_table& kt, act_format fmt, const float* x, std::int64_t k, void* buf);

/// dot(W row, x) for one weight row of k elements in its GGUF layout.
using row_dot_fn = float (*)(const void* w, const act_row& x, std::int64_t k);
/// y[c * ldy + r] = dot(W row r, x[c]) for r < nr, c < nc, where W row r starts at
/// w + r * w_stride (GGUF layout). The same sums as row_dot up to the order of float additions;
/// variants block rows and columns so that each decoded weight serves several activation rows.
using row_gemm_fn = void (*)(const void* w, std::size_t w_stride, int nr, const act_row* x, int nc, std::int64_t k,
                             float* y, std::int64_t ldy);
/// y[c * ldy + r] = sum_j w[r * k + j] * x[c * k + j] for r < nr, c < nc, all f32; k a multiple
/// of 16. Each output takes the very operations of the level's f32 row dot.
using gemm_f32_fn = void (*)(const float* w, const float* x, std::int64_t k, int nr, int nc, float* y, std::int64_t ldy);

/// Weights packed by pack_x16 (kernels/packed_x16.hpp) against activations interleaved by
/// interleave_q8_x8 (in the act_format_for the type): y[c * ldy + 16 g + i] = dot(W row 16 g + i, x[c]) for the groups g in
/// [g0, g1), i < 16, c < nc. Every m runs it (decode included), so a row gets the same bits alone
/// or in a batch.
using packed_gemm_fn = void (*)(const std::byte* w, std::int64_t g0, std::int64_t g1, const std::byte* xt, int nc,
                                std::int64_t k, float* y, std::int64_t ldy);

/// Quantized activation rows for kernel_table::packed_gemm, in tiles of up to 8 rows (the last
/// tile takes what is left), so that a tile is one stream the kernel reads at fixed offsets. For a
/// tile of C rows, each block of all C rows (32 values for q8_32, 256 for q8_256) takes
/// interleaved_row_block_bytes(fmt) * C bytes:
///
///   q8_32:  | int32 q[8][C]: q[s][c] = bytes 4s..4s+3 of row c's block | int32 -128 * sum of row c's block, [C] | f32 scale [C] |
///   q8_256: | int32 q[64][C] | int32 sums[16][C]: row c's sums per 16 | f32 scale [C] |
///
/// The tile of rows from c0 (a multiple of 8) starts at byte interleaved_q8_x8_bytes(fmt, c0, k).
constexpr int k_interleave_rows = 8;
constexpr std::int64_t interleaved_row_block_bytes(act_format fmt) {
  return fmt == act_format::q8_256 ? 4 * (64 + 16 + 1) : 4 * (8 + 1 + 1);
}
inline std::size_t interleaved_q8_x8_bytes(act_format fmt, std::int64_t rows, std::int64_t k) {
  return static_cast<std::size_t>(interleaved_row_block_bytes(fmt) * rows * (k / (fmt == act_format::q8_256 ? 256 : 32)));
}
/// Writes rows [r0, r1) of the n rows x (q8_32 or q8_256) into xt, laid out as above for n rows.
void interleave_q8_x8(act_format fmt, const act_row* x, std::int64_t r0, std::int64_t r1, std::int64_t n, std::int64_t k,
                      std::byte* xt);

/// Index of a dtype in kernel_table::row_dot.
int dtype_slot(dtype t);
constexpr int k_dtype_slots = 13;
/// The read loops of kernel_table::sum_words: 1, 2 and 4 vector loads per iteration.
constexpr int k_read_loops = 3;

struct kernel_table {
  simd_level level = simd_level::scalar;
  /// sum_i a[i] * b[i]
  float (*dot)(const float* a, const float* b, std::int64_t n) = nullptr;
  /// f16 to f32 conversion of a row, and back (round to nearest even, as fp32_to_fp16).
  void (*f16_to_f32)(const std::uint16_t* src, float* dst, std::int64_t n) = nullptr;
  void (*f32_to_f16)(const float* src, std::uint16_t* dst, std::int64_t n) = nullptr;
  /// y += a * x
  void (*axpy)(float a, const float* x, float* y, std::int64_t n) = nullptr;
  /// Groups of `group` values (32 or 256) get one scale d = max|x| / 127 and levels round(x / d);
  /// sums of the levels per `sum_group` (16 or 32) values.
  void (*quantize_groups)(const float* x, std::int64_t k, int group, int sum_group, std::int8_t* qs, float* d,
                          std::int32_t* sums) = nullptr;
  /// In place: x * sigmoid(x), and GELU with the tanh approximation.
  void (*silu)(float* x, std::int64_t n) = nullptr;
  void (*gelu)(float* x, std::int64_t n) = nullptr;
  /// kernels::rms_norm; every level gives the scalar one's bits.
  void (*rms_norm)(const float* x, const float* weight, float* y, std::int64_t n, float eps) = nullptr;
  /// Wrapping sum of n 64-bit words (n a multiple of 32) with the widest loads the level has,
  /// 1, 2 or 4 of them per iteration: the probes `strata bench` measures the memory read
  /// bandwidth with. Which reads fastest depends on the CPU (on Zen 5 a loop of one or two 64-byte
  /// loads reads a fifth faster than one of four: with fewer demand loads in flight, its
  /// prefetchers get more of the core's misses), so the probe times them all and keeps the best.
  std::uint64_t (*sum_words[k_read_loops])(const std::uint64_t* p, std::int64_t n) = {};
  row_dot_fn row_dot[k_dtype_slots] = {};
  /// For the quantized types (the float slots stay null: they take gemm_f32).
  row_gemm_fn row_gemm[k_dtype_slots] = {};
  gemm_f32_fn gemm_f32 = nullptr;
  /// Weights of the packable types (x16_packable: the 32-value block types, mxfp4 among them,
  /// and q4_K, q6_K) in 16-row groups (pack_x16), every m, per dtype_slot;
  /// null where the level has none for the type (the weights then stay in their GGUF layout).
  packed_gemm_fn packed_gemm[k_dtype_slots] = {};
};

/// A row GEMM made of row dots, activation rows outermost (each stays in L1 across the weight
/// rows of the block).
template <row_dot_fn dot>
void row_gemm_by_dots(const void* w, std::size_t w_stride, int nr, const act_row* x, int nc, std::int64_t k, float* y,
                      std::int64_t ldy) {
  for (int c = 0; c < nc; ++c)
    for (int r = 0; r < nr; ++r)
      y[c * ldy + r] = dot(static_cast<const std::byte*>(w) + static_cast<std::size_t>(r) * w_stride, x[c], k);
}

/// A level's table. Filling the tables runs no SIMD code, so this is safe on any CPU; calling a
/// kernel of a level is not where simd_level_enabled(level) is false.
const kernel_table& kernels_for(simd_level level);
/// The table in use: the level of configured_simd_level(). Where STRATA_ISA is refused, prints
/// the error and ends the process (strata itself checks configured_simd_level() at start).
const kernel_table& active_kernels();
const char* simd_level_name(simd_level level);
/// Whether this CPU can run a level (cpuid).
bool cpu_supports(simd_level level);
/// The best level this CPU supports.
simd_level best_simd_level();
/// The level to run, or why there is none (error not empty; the level is then meaningless).
struct simd_choice {
  simd_level level = simd_level::scalar;
  std::string error;
};
/// The level to run given the value of STRATA_ISA (null or empty: not set) and the best level the
/// CPU supports: that best level, or the named one at or below it. An unknown name, or a level
/// above `best`, is an error that says which levels this CPU has.
simd_choice choose_simd_level(const char* forced, simd_level best);
/// choose_simd_level for this CPU and $STRATA_ISA (or STRATA_KERNELS, its older name).
simd_choice configured_simd_level();
/// Whether code of a level may run: the CPU has it and STRATA_ISA does not ask for a lower one.
bool simd_level_enabled(simd_level level);

namespace scalar {
float dot(const float* a, const float* b, std::int64_t n);
void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n);
void f32_to_f16(const float* src, std::uint16_t* dst, std::int64_t n);
void axpy(float a, const float* x, float* y, std::int64_t n);
void quantize_groups(const float* x, std::int64_t k, int group, int sum_group, std::int8_t* qs, float* d,
                     std::int32_t* sums);
void silu(float* x, std::int64_t n);
void gelu(float* x, std::int64_t n);
void rms_norm(const float* x, const float* weight, float* y, std::int64_t n, float eps);
std::uint64_t sum_words(const std::uint64_t* p, std::int64_t n);
void fill_table(kernel_table& t);
}  // namespace scalar
namespace avx2 {
void fill_table(kernel_table& t);
}  // namespace avx2
namespace avx512 {
void fill_table(kernel_table& t);
}  // namespace avx512

}  // namespace strata::kernels
