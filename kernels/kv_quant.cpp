#include "kernels/kv_quant.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::kernels {
namespace {

constexpr int k_max_width = 512;

/// D's signs, +1 or -1 for each of the first 512 values of a piece: the top bits of a fixed
/// 64-bit xorshift sequence. Fixed forever: the q4_0 pages of a cache (and on disk) are stored
/// rotated by them.
constexpr std::array<float, k_max_width> make_signs() {
  std::array<float, k_max_width> s{};
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (float& v : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = (x >> 63) != 0 ? -1.0f : 1.0f;
  }
  return s;
}
constexpr std::array<float, k_max_width> k_signs = make_signs();

/// In place, the unnormalized Walsh-Hadamard transform of w values (w a power of two).
void walsh_hadamard(float* v, int w) {
  for (int len = 1; len < w; len <<= 1)
    for (int i = 0; i < w; i += len << 1)
      for (int j = i; j < i + len; ++j) {
        const float a = v[j], c = v[j + len];
        v[j] = a + c;
        v[j + len] = a - c;
      }
}

/// The value of largest magnitude of 32, with its sign (0 for an all-zero block).
float largest_magnitude32(const float* x) {
  float amax = 0, max = 0;
  for (int j = 0; j < k_qk; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

/// Each of 32 values' nearest level of scale d, in -8..7 (a tie rounds up, as quantize_row's
/// q4_0 does), into l; returns the squared error.
float fit_levels(const float* x, float d, int* l) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  float err = 0;
  for (int j = 0; j < k_qk; ++j) {
    // Shifted by 8.5 and clamped to [0, 15]: truncation then rounds.
    l[j] = static_cast<int>(std::clamp(x[j] * id + 8.5f, 0.0f, 15.0f)) - 8;
    const float e = x[j] - static_cast<float>(l[j]) * d;
    err += e * e;
  }
  return err;
}

/// The scale that minimises the squared error of 32 values for levels l (0 when all are 0),
/// rounded to f16 as it will be stored.
std::uint16_t least_squares_scale(const float* x, const int* l) {
  float sxl = 0, sll = 0;
  for (int j = 0; j < k_qk; ++j) {
    sxl += x[j] * static_cast<float>(l[j]);
    sll += static_cast<float>(l[j] * l[j]);
  }
  return fp32_to_fp16(sll > 0 ? sxl / sll : 0.0f);
}

/// Where the candidates of quantize_q4_0_fitted put the block's largest magnitude: level -(8 + s)
/// for each step s. Fitted by least squares afterwards, so a coarse set suffices (on N(0, 1)
/// blocks a finer or wider one changes the RMS error by under 0.5%).
constexpr float k_fit_steps[] = {0.0f, -1.5f, -1.0f, -0.5f, 0.5f, 1.0f, 1.5f, 2.0f};

}  // namespace

int rotation_width(int head_dim) {
  int w = 1;
  while (w < k_max_width && head_dim % (2 * w) == 0) w *= 2;
  return w;
}

void rotate_pieces(float* x, std::int64_t n, int width) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(width));
  for (std::int64_t b = 0; b + width <= n; b += width) {
    float* v = x + b;
    for (int i = 0; i < width; ++i) v[i] *= k_signs[static_cast<std::size_t>(i)];
    walsh_hadamard(v, width);
    for (int i = 0; i < width; ++i) v[i] *= norm;
  }
}

void unrotate_pieces(float* x, std::int64_t n, int width) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(width));
  for (std::int64_t b = 0; b + width <= n; b += width) {
    float* v = x + b;
    walsh_hadamard(v, width);
    for (int i = 0; i < width; ++i) v[i] *= norm * k_signs[static_cast<std::size_t>(i)];
  }
}

void quantize_q4_0_fitted(const float* x, block_q4_0* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n / k_qk; ++i, x += k_qk) {
    const float max = largest_magnitude32(x);
    std::uint16_t best_d = 0;
    int best[k_qk], l[k_qk];
    std::fill(best, best + k_qk, 0);
    float best_err = std::numeric_limits<float>::infinity();
    for (float step : k_fit_steps) {
      if (max == 0) break;
      fit_levels(x, max / -(8.0f + step), l);
      const std::uint16_t d = least_squares_scale(x, l);
      const float err = fit_levels(x, fp16_to_fp32(d), l);
      if (err < best_err) {
        best_err = err;
        best_d = d;
        std::copy(l, l + k_qk, best);
      }
    }
    dst[i].d = best_d;
    for (int j = 0; j < k_qk / 2; ++j)
      dst[i].qs[j] = static_cast<std::uint8_t>((best[j] + 8) | (best[j + k_qk / 2] + 8) << 4);
  }
}

}  // namespace strata::kernels
