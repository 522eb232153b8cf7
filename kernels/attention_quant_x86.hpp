#pragma once
// AVX2 conversion of KV rows to f32 for the attention loop: f16 through F16C, and GGUF q8_0 / q4_0
// blocks of 32 values widened and scaled in registers. Included by attention_avx2.cpp and
// attention_avx512.cpp inside their target pragmas; internal linkage keeps each copy inside its
// translation unit.

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/quants.hpp"

namespace strata::kernels::detail {
namespace {

inline float hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

/// 8 signed bytes to 8 floats.
inline __m256 widen8(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)); }

struct f16_rows_x86 {
  static void rows(const std::byte* src, std::int64_t stride, int n_rows, tile_rows dst, int n) {
    for (int r = 0; r < n_rows; ++r) {
      const auto* h = reinterpret_cast<const std::uint16_t*>(src + r * stride);
      int i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst[r] + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
      for (; i < n; ++i) dst[r][i] = _cvtsh_ss(h[i]);
    }
  }
};

struct q8_0_rows_x86 {
  static void rows(const std::byte* src, std::int64_t stride, int n_rows, tile_rows dst, int n) {
    for (int r = 0; r < n_rows; ++r) {
      const auto* b = reinterpret_cast<const block_q8_0*>(src + r * stride);
      for (int blk = 0; blk < n / k_qk; ++blk) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[blk].d));
        float* o = dst[r] + blk * k_qk;
        for (int j = 0; j < k_qk; j += 8) {
          const __m128i w = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[blk].qs + j));
          _mm256_storeu_ps(o + j, _mm256_mul_ps(d, widen8(w)));
        }
      }
    }
  }
};

struct q4_0_rows_x86 {
  static void rows(const std::byte* src, std::int64_t stride, int n_rows, tile_rows dst, int n) {
    const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
    for (int r = 0; r < n_rows; ++r) {
      const auto* b = reinterpret_cast<const block_q4_0*>(src + r * stride);
      for (int blk = 0; blk < n / k_qk; ++blk) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[blk].d));
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[blk].qs));
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(x, mask), eight);                      // elements 0..15
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), mask), eight);  // 16..31
        float* o = dst[r] + blk * k_qk;
        _mm256_storeu_ps(o, _mm256_mul_ps(d, widen8(lo)));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(d, widen8(_mm_srli_si128(lo, 8))));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, widen8(hi)));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(d, widen8(_mm_srli_si128(hi, 8))));
      }
    }
  }
};

}  // namespace
}  // namespace strata::kernels::detail
