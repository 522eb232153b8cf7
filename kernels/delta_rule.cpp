#include "kernels/delta_rule.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace strata::kernels {

void delta_rule_recurrent(const kernel_table& kt, const delta_rule_rows& r, int dim, float scale, float* state) {
  for (std::int64_t t = 0; t < r.n; ++t) {
    const float* q = r.q + t * r.qkv_stride;
    const float* k = r.k + t * r.qkv_stride;
    const float* v = r.v + t * r.qkv_stride;
    const float decay = std::exp(r.g[t * r.gb_stride]), beta = r.beta[t * r.gb_stride];
    float* out = r.out + t * r.out_stride;
    for (int j = 0; j < dim; ++j) {
      float* row = state + static_cast<std::int64_t>(j) * dim;
      for (int i = 0; i < dim; ++i) row[i] *= decay;
      const float u = beta * (v[j] - kt.dot(row, k, dim));
      kt.axpy(u, k, row, dim);
      out[j] = scale * kt.dot(row, q, dim);
    }
  }
}

namespace {

constexpr int C = k_delta_rule_max_chunk;

}  // namespace

std::size_t delta_rule_work_floats(int dim) {
  return 3 * static_cast<std::size_t>(C) * static_cast<std::size_t>(dim) + 2 * static_cast<std::size_t>(C * C) + C;
}

int delta_rule_chunk_for(int block_tokens) {
  int c = k_delta_rule_max_chunk;
  while (c > 1 && block_tokens % c != 0) --c;
  return c;
}

void delta_rule_chunked(const kernel_table& kt, const delta_rule_rows& r, int dim, float scale, float* state, float* work, int chunk) {
  chunk = std::clamp(chunk, 1, k_delta_rule_max_chunk);
  // The chunk's working set: M0 k_t, M0 q_t and u_t (C x dim each), k_s . k_t and k_s . q_t
  // (C x C each), and the running sums of g.
  struct {
    float *w, *p, *u, *kk, *qk, *cum;
  } b{work, work + C * dim, work + 2 * C * dim, work + 3 * C * dim, work + 3 * C * dim + C * C, work + 3 * C * dim + 2 * C * C};
  for (std::int64_t t0 = 0, step = 0; t0 < r.n; t0 += step) {
    // Up to the next position that is a multiple of chunk.
    step = std::min<std::int64_t>(chunk - (r.pos + t0) % chunk, r.n - t0);
    const int c = static_cast<int>(step);
    auto q = [&](int t) { return r.q + (t0 + t) * r.qkv_stride; };
    auto k = [&](int t) { return r.k + (t0 + t) * r.qkv_stride; };
    float sum = 0;
    for (int t = 0; t < c; ++t) b.cum[t] = sum += r.g[(t0 + t) * r.gb_stride];
    // What the chunk's starting state gives each row's key and query.
    for (int t = 0; t < c; ++t) {
      float* w = b.w + t * dim;
      float* p = b.p + t * dim;
      for (int j = 0; j < dim; ++j) {
        const float* row = state + static_cast<std::int64_t>(j) * dim;
        w[j] = kt.dot(row, k(t), dim);
        p[j] = kt.dot(row, q(t), dim);
      }
    }
    for (int t = 0; t < c; ++t) {
      for (int s = 0; s < t; ++s) b.kk[t * C + s] = kt.dot(k(s), k(t), dim);
      for (int s = 0; s <= t; ++s) b.qk[t * C + s] = kt.dot(k(s), q(t), dim);
    }
    // The updates u_t, each from the earlier ones (a triangular solve by substitution), then the
    // outputs.
    for (int t = 0; t < c; ++t) {
      const float beta = r.beta[(t0 + t) * r.gb_stride], et = std::exp(b.cum[t]);
      const float* v = r.v + (t0 + t) * r.qkv_stride;
      float* u = b.u + t * dim;
      const float* w = b.w + t * dim;
      for (int j = 0; j < dim; ++j) u[j] = beta * (v[j] - et * w[j]);
      for (int s = 0; s < t; ++s) kt.axpy(-beta * std::exp(b.cum[t] - b.cum[s]) * b.kk[t * C + s], b.u + s * dim, u, dim);
      float* out = r.out + (t0 + t) * r.out_stride;
      const float* p = b.p + t * dim;
      for (int j = 0; j < dim; ++j) out[j] = scale * et * p[j];
      for (int s = 0; s <= t; ++s) kt.axpy(scale * std::exp(b.cum[t] - b.cum[s]) * b.qk[t * C + s], b.u + s * dim, out, dim);
    }
    // The state at the chunk's end.
    const float last = b.cum[c - 1], e_last = std::exp(last);
    std::array<float, C> coef{};
    for (int s = 0; s < c; ++s) coef[s] = std::exp(last - b.cum[s]);
    for (int j = 0; j < dim; ++j) {
      float* row = state + static_cast<std::int64_t>(j) * dim;
      for (int i = 0; i < dim; ++i) row[i] *= e_last;
      for (int s = 0; s < c; ++s) kt.axpy(coef[s] * b.u[s * dim + j], k(s), row, dim);
    }
  }
}

void causal_conv(const float* x, std::int64_t x_stride, std::int64_t n, std::int64_t channels, std::int64_t c0, std::int64_t c1,
                 const float* taps_w, int taps, float* state, float* out, std::int64_t out_stride) {
  const int past = taps - 1;
  const std::int64_t width = c1 - c0;
  // The input row at offset o from row 0 (negative: from the state), at channel c0.
  auto in = [&](std::int64_t o) { return (o < 0 ? state + (o + past) * channels : x + o * x_stride) + c0; };
  for (std::int64_t t = 0; t < n; ++t) {
    float* y = out + t * out_stride + c0;
    std::fill(y, y + width, 0.0f);
    for (int tap = 0; tap < taps; ++tap) {
      const float* src = in(t - past + tap);
      const float* w = taps_w + tap * channels + c0;
      for (std::int64_t ch = 0; ch < width; ++ch) y[ch] += src[ch] * w[ch];
    }
  }
  // The last `past` input rows become the state (older state rows shift down when n < past).
  const auto bytes = sizeof(float) * static_cast<std::size_t>(width);
  for (int i = 0; i < past; ++i) {
    const std::int64_t o = n - past + i;  // the input row that state row i takes
    std::memmove(state + i * channels + c0, in(o), bytes);
  }
}

void conv_taps_major(const float* w, std::int64_t channels, int taps, float* taps_w) {
  for (std::int64_t ch = 0; ch < channels; ++ch)
    for (int tap = 0; tap < taps; ++tap) taps_w[tap * channels + ch] = w[ch * taps + tap];
}

void l2_norm_heads(float* x, int n_heads, int dim, float eps) {
  for (int hh = 0; hh < n_heads; ++hh) {
    float* v = x + static_cast<std::int64_t>(hh) * dim;
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
    const float s = 1.0f / std::sqrt(static_cast<float>(sum) + eps);
    for (int i = 0; i < dim; ++i) v[i] *= s;
  }
}

}  // namespace strata::kernels
