#include "src/sampling/vocab_ops.hpp"

#include <cmath>
#include <limits>

namespace strata::sampling {
namespace {

constexpr std::int32_t lanes = 8;
/// The maximum's lanes: a comparison is cheap next to its latency, so more of them stay in flight.
constexpr std::int32_t max_lanes = 32;

}  // namespace

float max_logit(const float* logits, std::int32_t n) noexcept {
  float m[max_lanes];
  for (float& x : m) x = -std::numeric_limits<float>::infinity();
  std::int32_t i = 0;
  for (; i + max_lanes <= n; i += max_lanes)
    for (std::int32_t j = 0; j < max_lanes; ++j) m[j] = logits[i + j] > m[j] ? logits[i + j] : m[j];
  for (; i < n; ++i) m[0] = logits[i] > m[0] ? logits[i] : m[0];
  float mx = m[0];
  for (std::int32_t j = 1; j < max_lanes; ++j) mx = m[j] > mx ? m[j] : mx;
  return mx;
}

std::int32_t argmax(const float* logits, std::int32_t n) noexcept {
  const float mx = max_logit(logits, n);
  if (mx == -std::numeric_limits<float>::infinity()) return 0;  // every value is -inf or NaN
  for (std::int32_t i = 0; i < n; ++i)
    if (logits[i] == mx) return i;
  return 0;
}

double exp_and_sum(const float* logits, std::int32_t n, float shift, float scale, float* out) noexcept {
  double s[lanes] = {};
  std::int32_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (std::int32_t j = 0; j < lanes; ++j) {
      out[i + j] = std::exp((logits[i + j] - shift) * scale);
      s[j] += out[i + j];
    }
  }
  for (; i < n; ++i) s[0] += out[i] = std::exp((logits[i] - shift) * scale);
  double total = 0;
  for (double x : s) total += x;
  return total;
}

double sum_exp(const float* logits, std::int32_t n, float shift) noexcept {
  double s[lanes] = {};
  std::int32_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::int32_t j = 0; j < lanes; ++j) s[j] += std::exp(logits[i + j] - shift);
  for (; i < n; ++i) s[0] += std::exp(logits[i] - shift);
  double total = 0;
  for (double x : s) total += x;
  return total;
}

}  // namespace strata::sampling
