#pragma once
// The per-CPU kernel table: the scalar reference and the AVX2 / AVX-512 variants of the inner
// loops, picked once at start from cpuid (STRATA_KERNELS=scalar|avx2|avx512 forces a level).

#include <cstdint>

namespace strata::kernels {

enum class simd_level { scalar, avx2, avx512 };

struct kernel_table {
  simd_level level = simd_level::scalar;
  /// sum_i a[i] * b[i]
  float (*dot)(const float* a, const float* b, std::int64_t n) = nullptr;
  /// out[r][c] = dot(w[r], x[c]) for 4 weight rows and 4 activation rows (stride k).
  void (*dot_4x4)(const float* w, const float* x, std::int64_t k, float out[4][4]) = nullptr;
  /// f16 to f32 conversion of a row.
  void (*f16_to_f32)(const std::uint16_t* src, float* dst, std::int64_t n) = nullptr;
  /// y += a * x
  void (*axpy)(float a, const float* x, float* y, std::int64_t n) = nullptr;
};

const kernel_table& kernels_for(simd_level level);
/// The table in use: the best level this CPU supports, unless STRATA_KERNELS says otherwise.
const kernel_table& active_kernels();
const char* simd_level_name(simd_level level);
/// Levels this CPU can run, lowest first.
bool cpu_supports(simd_level level);

namespace scalar {
float dot(const float* a, const float* b, std::int64_t n);
void dot_4x4(const float* w, const float* x, std::int64_t k, float out[4][4]);
void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n);
void axpy(float a, const float* x, float* y, std::int64_t n);
}  // namespace scalar
namespace avx2 {
float dot(const float* a, const float* b, std::int64_t n);
void dot_4x4(const float* w, const float* x, std::int64_t k, float out[4][4]);
void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n);
void axpy(float a, const float* x, float* y, std::int64_t n);
}  // namespace avx2
namespace avx512 {
float dot(const float* a, const float* b, std::int64_t n);
void dot_4x4(const float* w, const float* x, std::int64_t k, float out[4][4]);
void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n);
void axpy(float a, const float* x, float* y, std::int64_t n);
}  // namespace avx512

}  // namespace strata::kernels
