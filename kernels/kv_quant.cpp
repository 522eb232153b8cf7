#include "kernels/kv_quant.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

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

/// Lanes of the running sums below: summing j % 8 apart keeps each loop free of a serial
/// dependence, so the compiler vectorizes it (a single float sum it may not reorder).
constexpr int k_lanes = 8;

float lane_total(const float (&acc)[k_lanes]) {
  float t = 0;
  for (float a : acc) t += a;
  return t;
}

/// Each of 32 values' nearest level of scale d, in -8..7 (a tie rounds up, as quantize_row's
/// q4_0 does), into l; returns sum x l and sum l^2 (what the least-squares scale of these levels,
/// xl / ll, and its squared error, sum x^2 - xl^2 / ll, are made of).
struct level_sums {
  float xl, ll;
};
level_sums fit_levels(const float* x, float d, float* l) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  float xl[k_lanes] = {}, ll[k_lanes] = {};
  for (int j0 = 0; j0 < k_qk; j0 += k_lanes)
    for (int j = j0; j < j0 + k_lanes; ++j) {
      // Shifted by 8.5 and clamped to [0, 15]: truncation then rounds.
      const float t = std::min(std::max(x[j] * id + 8.5f, 0.0f), 15.0f);
      l[j] = static_cast<float>(static_cast<int>(t)) - 8.0f;
      xl[j - j0] += x[j] * l[j];
      ll[j - j0] += l[j] * l[j];
    }
  return {lane_total(xl), lane_total(ll)};
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
    float l[k_qk];
    // The candidate whose levels, at their least-squares scale, leave the least error: the one
    // with the largest xl^2 / ll.
    float best_scale = 0, best_gain = 0;
    for (float step : k_fit_steps) {
      if (max == 0) break;
      const level_sums s = fit_levels(x, max / -(8.0f + step), l);
      if (s.ll > 0 && s.xl * s.xl / s.ll > best_gain) {
        best_gain = s.xl * s.xl / s.ll;
        best_scale = s.xl / s.ll;
      }
    }
    // Its scale as it is stored, and every value's nearest level under that.
    dst[i].d = fp32_to_fp16(best_scale);
    fit_levels(x, fp16_to_fp32(dst[i].d), l);
    for (int j = 0; j < k_qk / 2; ++j)
      dst[i].qs[j] = static_cast<std::uint8_t>(static_cast<int>(l[j] + 8) | static_cast<int>(l[j + k_qk / 2] + 8) << 4);
  }
}

}  // namespace strata::kernels
