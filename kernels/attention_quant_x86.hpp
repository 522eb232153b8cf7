#pragma once
// AVX2 reading of quantized KV rows (GGUF q8_0 and q4_0 blocks of 32 values): each block is widened
// to f32 in registers and scaled once. Included by attention_avx2.cpp and attention_avx512.cpp
// inside their target pragmas; internal linkage keeps each copy inside its translation unit.

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

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

struct q8_0_rows_x86 {
  static float dot(const float* q, const std::byte* k, int n) {
    const auto* b = reinterpret_cast<const block_q8_0*>(k);
    __m256 acc = _mm256_setzero_ps();
    for (int blk = 0; blk < n / k_qk; ++blk, q += k_qk) {
      __m256 s = _mm256_setzero_ps();
      for (int j = 0; j < k_qk; j += 8) {
        const __m128i w = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[blk].qs + j));
        s = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), widen8(w), s);
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[blk].d)), s, acc);
    }
    return hsum8(acc);
  }
  static void axpy(float a, const std::byte* v, float* acc, int n) {
    const auto* b = reinterpret_cast<const block_q8_0*>(v);
    for (int blk = 0; blk < n / k_qk; ++blk, acc += k_qk) {
      const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(b[blk].d));
      for (int j = 0; j < k_qk; j += 8) {
        const __m128i w = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[blk].qs + j));
        _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(ad, widen8(w), _mm256_loadu_ps(acc + j)));
      }
    }
  }
};

/// The 32 values of a q4_0 block as signed bytes: lo = elements 0..15, hi = 16..31.
inline void unpack_q4_0(const block_q4_0& b, __m128i& lo, __m128i& hi) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m128i mask = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  lo = _mm_sub_epi8(_mm_and_si128(x, mask), eight);
  hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), mask), eight);
}

struct q4_0_rows_x86 {
  static float dot(const float* q, const std::byte* k, int n) {
    const auto* b = reinterpret_cast<const block_q4_0*>(k);
    __m256 acc = _mm256_setzero_ps();
    for (int blk = 0; blk < n / k_qk; ++blk, q += k_qk) {
      __m128i lo, hi;
      unpack_q4_0(b[blk], lo, hi);
      __m256 s = _mm256_mul_ps(_mm256_loadu_ps(q), widen8(lo));
      s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), widen8(_mm_srli_si128(lo, 8)), s);
      s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), widen8(hi), s);
      s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), widen8(_mm_srli_si128(hi, 8)), s);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(b[blk].d)), s, acc);
    }
    return hsum8(acc);
  }
  static void axpy(float a, const std::byte* v, float* acc, int n) {
    const auto* b = reinterpret_cast<const block_q4_0*>(v);
    for (int blk = 0; blk < n / k_qk; ++blk, acc += k_qk) {
      const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(b[blk].d));
      __m128i lo, hi;
      unpack_q4_0(b[blk], lo, hi);
      _mm256_storeu_ps(acc, _mm256_fmadd_ps(ad, widen8(lo), _mm256_loadu_ps(acc)));
      _mm256_storeu_ps(acc + 8, _mm256_fmadd_ps(ad, widen8(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(acc + 8)));
      _mm256_storeu_ps(acc + 16, _mm256_fmadd_ps(ad, widen8(hi), _mm256_loadu_ps(acc + 16)));
      _mm256_storeu_ps(acc + 24, _mm256_fmadd_ps(ad, widen8(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(acc + 24)));
    }
  }
};

}  // namespace
}  // namespace strata::kernels::detail
