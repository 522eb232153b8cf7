#include "kernels/ssm_scan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace strata::kernels {

void ssm_scan_recurrent(const ssm_scan_rows& r, int head_dim, int d_state, float a, float* state) {
  for (std::int64_t t = 0; t < r.n; ++t) {
    const float dt = r.dt[t * r.dt_stride];
    const float decay = std::exp(dt * a);
    const float* x = r.x + t * r.x_stride;
    const float* B = r.B + t * r.bc_stride;
    const float* C = r.C + t * r.bc_stride;
    float* y = r.y + t * r.y_stride;
    for (int i = 0; i < head_dim; ++i) {
      float* s = state + static_cast<std::int64_t>(i) * d_state;
      const float x_dt = x[i] * dt;
      float sum = 0.0f;
      for (int j = 0; j < d_state; ++j) {
        s[j] = s[j] * decay + B[j] * x_dt;
        sum += s[j] * C[j];
      }
      y[i] = sum;
    }
  }
}

std::size_t ssm_scan_work_floats(int head_dim) {
  const auto L = static_cast<std::size_t>(k_ssm_scan_max_chunk);
  return L * L + 2 * L + static_cast<std::size_t>(head_dim);
}

void ssm_scan_chunked(const kernel_table& kt, const ssm_scan_rows& r, int head_dim, int d_state, float a, float* state, float* work,
                      int chunk) {
  if (chunk < 1 || chunk > k_ssm_scan_max_chunk) throw std::invalid_argument("ssm_scan_chunked: chunk out of range");
  const std::int64_t L = k_ssm_scan_max_chunk;
  float* w = work;                // w[t * L + s]: e^{G_t - G_s} (C_t . B_s) dt_s, s <= t
  float* G = work + L * L;        // running log-decay
  float* coef = G + L;            // e^{G_last - G_s} dt_s
  for (std::int64_t c0 = 0, n = 0; c0 < r.n; c0 += n) {
    n = std::min<std::int64_t>(chunk - (r.pos + c0) % chunk, r.n - c0);  // up to the next multiple of chunk
    float g = 0.0f;
    for (std::int64_t t = 0; t < n; ++t) G[t] = g += r.dt[(c0 + t) * r.dt_stride] * a;
    for (std::int64_t t = 0; t < n; ++t) {
      const float* C = r.C + (c0 + t) * r.bc_stride;
      for (std::int64_t s = 0; s <= t; ++s)
        w[t * L + s] = std::exp(G[t] - G[s]) * kt.dot(C, r.B + (c0 + s) * r.bc_stride, d_state) * r.dt[(c0 + s) * r.dt_stride];
    }
    // Outputs: the state at the chunk's start, decayed, then the chunk's own rows.
    for (std::int64_t t = 0; t < n; ++t) {
      const float* C = r.C + (c0 + t) * r.bc_stride;
      float* y = r.y + (c0 + t) * r.y_stride;
      const float e = std::exp(G[t]);
      for (int i = 0; i < head_dim; ++i) y[i] = e * kt.dot(state + static_cast<std::int64_t>(i) * d_state, C, d_state);
      for (std::int64_t s = 0; s <= t; ++s) kt.axpy(w[t * L + s], r.x + (c0 + s) * r.x_stride, y, head_dim);
    }
    // The state at the chunk's end.
    const float e_last = std::exp(G[n - 1]);
    for (std::int64_t s = 0; s < n; ++s) coef[s] = std::exp(G[n - 1] - G[s]) * r.dt[(c0 + s) * r.dt_stride];
    for (int i = 0; i < head_dim; ++i) {
      float* S = state + static_cast<std::int64_t>(i) * d_state;
      for (int j = 0; j < d_state; ++j) S[j] *= e_last;
      for (std::int64_t s = 0; s < n; ++s) kt.axpy(coef[s] * r.x[(c0 + s) * r.x_stride + i], r.B + (c0 + s) * r.bc_stride, S, d_state);
    }
  }
}

}  // namespace strata::kernels
