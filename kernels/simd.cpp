#include "kernels/simd.hpp"

#include <cstdlib>
#include <cstring>

#include "kernels/quants.hpp"

namespace strata::kernels {

namespace scalar {
float dot(const float* a, const float* b, std::int64_t n) {
  // Eight partial sums, like the SIMD variants, keep rounding error comparable and small.
  float s[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  float t = 0;
  for (; i < n; ++i) t += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}
void dot_4x4(const float* w, const float* x, std::int64_t k, float out[4][4]) {
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) out[r][c] = dot(w + r * k, x + c * k, k);
}
void f16_to_f32(const std::uint16_t* src, float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void axpy(float a, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
}  // namespace scalar

const char* simd_level_name(simd_level level) {
  switch (level) {
    case simd_level::scalar: return "scalar";
    case simd_level::avx2: return "avx2";
    case simd_level::avx512: return "avx512";
  }
  return "?";
}

bool cpu_supports(simd_level level) {
#if defined(__x86_64__)
  switch (level) {
    case simd_level::scalar: return true;
    case simd_level::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case simd_level::avx512:
      return cpu_supports(simd_level::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return level == simd_level::scalar;
#endif
}

const kernel_table& kernels_for(simd_level level) {
  static const kernel_table tables[] = {
      {simd_level::scalar, scalar::dot, scalar::dot_4x4, scalar::f16_to_f32, scalar::axpy},
      {simd_level::avx2, avx2::dot, avx2::dot_4x4, avx2::f16_to_f32, avx2::axpy},
      {simd_level::avx512, avx512::dot, avx512::dot_4x4, avx512::f16_to_f32, avx512::axpy},
  };
  return tables[static_cast<int>(level)];
}

const kernel_table& active_kernels() {
  static const kernel_table& table = [] () -> const kernel_table& {
    simd_level best = simd_level::scalar;
    if (cpu_supports(simd_level::avx2)) best = simd_level::avx2;
    if (cpu_supports(simd_level::avx512)) best = simd_level::avx512;
    if (const char* forced = std::getenv("STRATA_KERNELS")) {
      for (auto l : {simd_level::scalar, simd_level::avx2, simd_level::avx512})
        if (std::strcmp(forced, simd_level_name(l)) == 0 && cpu_supports(l)) best = l;
    }
    return kernels_for(best);
  }();
  return table;
}

}  // namespace strata::kernels
