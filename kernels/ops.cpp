#include "kernels/ops.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/simd.hpp"

namespace strata::kernels {

namespace scalar {

void rms_norm(const float* x, const float* weight, float* y, std::int64_t n, float eps) {
  // The squares (exact in double) summed into 16 running sums, one per lane of a group of 16
  // values, then those added pairwise: one running sum would make each addition wait on the last
  // (a prefill chunk spends more on these sums than on any other small operation), and a fixed
  // order keeps the result the same bits for a row alone or in any batch.
  constexpr int k_lanes = 16;
  double lane[k_lanes] = {};
  std::int64_t i = 0;
  for (; i + k_lanes <= n; i += k_lanes)
    for (int j = 0; j < k_lanes; ++j) lane[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (int j = 0; i + j < n; ++j) lane[j] += static_cast<double>(x[i + j]) * x[i + j];
  for (int w = k_lanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
  const double ss = lane[0];
  float s = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
  if (weight) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * s * weight[i];
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  }
}

}  // namespace scalar

void rms_norm(const float* x, const float* weight, float* y, std::int64_t n, float eps) {
  active_kernels().rms_norm(x, weight, y, n, eps);
}

void rope_angles_yarn(std::int32_t pos, int n_rot, float freq_base, float freq_scale, const yarn_params& y, float* cs) {
  // The dimension pair at which a frequency turns `turns` times over the original context.
  auto corr_dim = [&](float turns) {
    return static_cast<float>(n_rot) * std::log(static_cast<float>(y.n_ctx_orig) / (turns * 2.0f * 3.14159265358979f)) /
           (2.0f * std::log(freq_base));
  };
  const float low = std::max(0.0f, std::floor(corr_dim(y.beta_fast)));
  const float high = std::min(static_cast<float>(n_rot - 1), std::ceil(corr_dim(y.beta_slow)));
  const float mscale = y.attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale));
  for (int i = 0; i < n_rot / 2; ++i) {
    const float extrap = static_cast<float>(pos) * std::pow(freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
    const float ramp = (1.0f - std::clamp((static_cast<float>(i) - low) / std::max(0.001f, high - low), 0.0f, 1.0f)) * y.ext_factor;
    const float theta = freq_scale * extrap * (1.0f - ramp) + extrap * ramp;
    cs[2 * i] = std::cos(theta) * mscale;
    cs[2 * i + 1] = std::sin(theta) * mscale;
  }
}

void rope_angles(std::int32_t pos, int n_rot, float freq_base, float freq_scale, const float* factors, float* cs) {
  // freq_base^(-2i / n_rot) per i, kept per thread for the last (base, n_rot): the powers are
  // the same for every token of a model.
  thread_local struct {
    float base = 0;
    int n_rot = 0;
    std::vector<float> inv;
  } freqs;
  if (freqs.base != freq_base || freqs.n_rot != n_rot) {
    freqs.inv.resize(static_cast<std::size_t>(n_rot / 2));
    for (int i = 0; i < n_rot / 2; ++i)
      freqs.inv[static_cast<std::size_t>(i)] = std::pow(freq_base, -2.0f * static_cast<float>(i) / static_cast<float>(n_rot));
    freqs.base = freq_base;
    freqs.n_rot = n_rot;
  }
  const float p = static_cast<float>(pos) * freq_scale;
  for (int i = 0; i < n_rot / 2; ++i) {
    float theta = p * freqs.inv[static_cast<std::size_t>(i)];
    if (factors) theta /= factors[i];
    cs[2 * i] = std::cos(theta);
    cs[2 * i + 1] = std::sin(theta);
  }
}

void rope_rotate(float* x, int n_heads, int head_dim, int n_rot, const float* cs, bool neox) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + n_rot / 2 : 2 * i + 1;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

float softmax(float* x, std::int64_t n) {
  float mx = *std::max_element(x, x + n);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
  return mx + static_cast<float>(std::log(sum));
}

void silu(float* x, std::int64_t n) { active_kernels().silu(x, n); }

void gelu(float* x, std::int64_t n) { active_kernels().gelu(x, n); }

void soft_cap(float* x, std::int64_t n, float cap) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void mul(float* y, const float* a, const float* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void add(float* y, const float* a, const float* b, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void scale(float* x, std::int64_t n, float s) {
  for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

void convert_row_to_f16(const float* src, std::uint16_t* dst, std::int64_t n) {
  active_kernels().f32_to_f16(src, dst, n);
}

void convert_row_from_f16(const std::uint16_t* src, float* dst, std::int64_t n) { active_kernels().f16_to_f32(src, dst, n); }

}  // namespace strata::kernels
