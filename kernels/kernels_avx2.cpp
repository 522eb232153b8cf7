// AVX2 + FMA + F16C variants. The target is set for the kernels only, between push_options and
// pop_options: the headers above it (whose inline functions the linker may share with other
// files) and fill_table below it are compiled for the baseline CPU, so that filling the table
// runs on any CPU; the kernels run only where simd_level_enabled(avx2) said so.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/x86_row_dots.hpp"

namespace strata::kernels::avx2 {
namespace {

float dot(const float* a, const float* b, std::int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float t = hsum256(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

inline __m256 load_f16(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
[[maybe_unused]] inline __m256 load_bf16(const std::uint16_t* p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/// A float weight row (f32 in place, f16 or bf16 widened by `load`, `one` for the last values)
/// against f32 activations: one running sum over 8-value pieces in order, its hsum256, then the
/// values past the last whole piece; for k a multiple of 8 the very operations of micro's tiles
/// for each output. Decode streams weights from memory, so the one FMA chain costs it little.
template <class T, __m256 (*load)(const T*), float (*one)(T)>
float row_dot_f(const void* w, const act_row& x, std::int64_t k) {
  const auto* h = static_cast<const T*>(w);
  __m256 s = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) s = _mm256_fmadd_ps(load(h + i), _mm256_loadu_ps(x.f + i), s);
  float t = hsum256(s);
  for (; i < k; ++i) t += one(h[i]) * x.f[i];
  return t;
}
inline __m256 load_f32(const float* p) { return _mm256_loadu_ps(p); }
inline float one_f32(float v) { return v; }

void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(src + i));
  if (i < n) scalar::f16_to_f32(src + i, dst + i, n - i);
}

void f32_to_f16(const float* src, std::uint16_t* dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) scalar::f32_to_f16(src + i, dst + i, n - i);
}

void axpy(float a, const float* x, float* y, std::int64_t n) {
  __m256 av = _mm256_set1_ps(a);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

/// R weight rows x C activation rows with FMA; k a multiple of 8. Each output is one running sum
/// over the 8-value pieces in order and then hsum256: the operations of row_dot_f, so that a row
/// gets the same bits from these tiles (prefill) as from the row dots (decode, small batches).
template <int R, int C>
void micro(const float* w, const float* x, std::int64_t k, float* y, std::int64_t ldy) {
  // Fully unrolled so that the accumulators stay in registers.
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < k; i += 8) {
    __m256 xv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_ps(x + c * k + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_loadu_ps(w + r * k + i);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[c * ldy + r] = hsum256(acc[r][c]);
}

using micro_fn = void (*)(const float*, const float*, std::int64_t, float*, std::int64_t);
constexpr micro_fn k_micro[2][4] = {
    {micro<1, 1>, micro<1, 2>, micro<1, 3>, micro<1, 4>},
    {micro<2, 1>, micro<2, 2>, micro<2, 3>, micro<2, 4>},
};

void gemm_f32(const float* w, const float* x, std::int64_t k, int nr, int nc, float* y, std::int64_t ldy) {
  for (int c = 0; c < nc; c += 4) {
    const int cc = std::min(4, nc - c);
    for (int r = 0; r < nr; r += 2) {
      const int rr = std::min(2, nr - r);
      k_micro[rr - 1][cc - 1](w + r * k, x + c * k, k, y + c * ldy + r, ldy);
    }
  }
}

float one_f16(std::uint16_t h) { return fp16_to_fp32(h); }
float one_bf16(std::uint16_t h) { return bf16_to_fp32(h); }

/// U loads of 32 bytes per iteration into U sums.
template <int U>
std::uint64_t sum_words(const std::uint64_t* p, std::int64_t n) {
  __m256i s[U] = {};
  for (std::int64_t i = 0; i + 4 * U <= n; i += 4 * U)
#pragma GCC unroll 4
    for (int j = 0; j < U; ++j) s[j] = _mm256_add_epi64(s[j], load256(p + i + 4 * j));
  for (int j = 1; j < U; ++j) s[0] = _mm256_add_epi64(s[0], s[j]);
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s[0]);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace
}  // namespace strata::kernels::avx2

#pragma GCC pop_options

namespace strata::kernels::avx2 {

void fill_table(kernel_table& t) {
  t.sum_words[0] = sum_words<1>;
  t.sum_words[1] = sum_words<2>;
  t.sum_words[2] = sum_words<4>;
  t.f32_to_f16 = f32_to_f16;
  t.dot = dot;
  t.f16_to_f32 = f16_to_f32;
  t.axpy = axpy;
  t.quantize_groups = x86_quantize_groups;
  t.silu = x86_sigmoid_gate<false>;
  t.gelu = x86_sigmoid_gate<true>;
  t.row_dot[dtype_slot(dtype::f32)] = row_dot_f<float, load_f32, one_f32>;
  t.row_dot[dtype_slot(dtype::f16)] = row_dot_f<std::uint16_t, load_f16, one_f16>;
  t.row_dot[dtype_slot(dtype::bf16)] = row_dot_f<std::uint16_t, load_bf16, one_bf16>;
  t.row_dot[dtype_slot(dtype::q4_0)] = x86_dot_q4_0;
  t.row_dot[dtype_slot(dtype::q4_1)] = x86_dot_q4_1;
  t.row_dot[dtype_slot(dtype::q5_0)] = x86_dot_q5_0;
  t.row_dot[dtype_slot(dtype::q5_1)] = x86_dot_q5_1;
  t.row_dot[dtype_slot(dtype::iq4_nl)] = x86_dot_iq4_nl;
  t.row_dot[dtype_slot(dtype::mxfp4)] = x86_dot_mxfp4;
  t.row_dot[dtype_slot(dtype::q8_0)] = x86_dot_q8_0;
  t.row_dot[dtype_slot(dtype::q4_k)] = x86_dot_k45<false>;
  t.row_dot[dtype_slot(dtype::q5_k)] = x86_dot_k45<true>;
  t.row_dot[dtype_slot(dtype::q6_k)] = x86_dot_q6_k;
  t.row_gemm[dtype_slot(dtype::q4_0)] = row_gemm_by_dots<x86_dot_q4_0>;
  t.row_gemm[dtype_slot(dtype::q4_1)] = row_gemm_by_dots<x86_dot_q4_1>;
  t.row_gemm[dtype_slot(dtype::q5_0)] = row_gemm_by_dots<x86_dot_q5_0>;
  t.row_gemm[dtype_slot(dtype::q5_1)] = row_gemm_by_dots<x86_dot_q5_1>;
  t.row_gemm[dtype_slot(dtype::iq4_nl)] = row_gemm_by_dots<x86_dot_iq4_nl>;
  t.row_gemm[dtype_slot(dtype::mxfp4)] = row_gemm_by_dots<x86_dot_mxfp4>;
  t.row_gemm[dtype_slot(dtype::q8_0)] = row_gemm_by_dots<x86_dot_q8_0>;
  t.row_gemm[dtype_slot(dtype::q4_k)] = row_gemm_by_dots<x86_dot_k45<false>>;
  t.row_gemm[dtype_slot(dtype::q5_k)] = row_gemm_by_dots<x86_dot_k45<true>>;
  t.row_gemm[dtype_slot(dtype::q6_k)] = row_gemm_by_dots<x86_dot_q6_k>;
  t.gemm_f32 = gemm_f32;
}

}  // namespace strata::kernels::avx2
