#include "src/model/moe_ffn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "src/model/for_rows.hpp"

namespace strata::model {
namespace {

/// The expert activation over rows of n values: gate := act(gate) * up.
void activate(const hparams& h, float* gate, const float* up, std::int64_t n) {
  if (!h.swiglu_oai) {
    kernels::silu(gate, n);
    kernels::mul(gate, gate, up, n);
    return;
  }
  constexpr float alpha = hparams::k_swiglu_oai_alpha, limit = hparams::k_swiglu_oai_limit;
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], limit);
    const float y = std::clamp(up[i], -limit, limit);
    gate[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
  }
}

/// Adds expert e's bias row (of n values) to rows [r0, r1) of y, when the layer has one.
void add_bias(const tensor_view& b, std::int32_t e, float* y, std::int64_t r0, std::int64_t r1, std::int64_t n) {
  if (!b) return;
  for (std::int64_t r = r0; r < r1; ++r) kernels::add(y + r * n, y + r * n, b.f32() + e * n, n);
}

/// One layer's buffers for a batch, per thread, grown on first use.
struct moe_buffers {
  std::vector<float> logits, weights, x, gate, up, down;
  std::vector<std::int32_t> experts, row_of, source, count;
  std::vector<kernels::expert_rows> groups;
};

template <class T>
T* sized(std::vector<T>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

}  // namespace

void route(const hparams& h, const float* logits, std::int32_t* experts, float* weights) {
  const int ne = h.n_expert, k = h.n_expert_used;
  thread_local std::vector<std::int32_t> order;
  thread_local std::vector<float> probs;
  order.resize(static_cast<std::size_t>(ne));
  probs.assign(logits, logits + ne);
  // qwen3moe compares softmax probabilities, gpt-oss the logits: the same order either way.
  if (!h.router_softmax_after_topk) kernels::softmax(probs.data(), ne);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) {
    return probs[static_cast<std::size_t>(a)] > probs[static_cast<std::size_t>(b)] ||
           (probs[static_cast<std::size_t>(a)] == probs[static_cast<std::size_t>(b)] && a < b);
  });
  for (int j = 0; j < k; ++j) {
    experts[j] = order[static_cast<std::size_t>(j)];
    weights[j] = probs[static_cast<std::size_t>(experts[j])];
  }
  if (h.router_softmax_after_topk) {
    kernels::softmax(weights, k);
    return;
  }
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += weights[j];
  sum = std::max(sum, 6.103515625e-5f);  // the smallest normal f16, as llama.cpp clamps it
  for (int j = 0; j < k; ++j) weights[j] /= sum;
}

void moe_ffn(const layer_weights& w, const hparams& h, const float* cur, std::int64_t n, float* out, kernels::compute_pool& pool) {
  const std::int64_t d = h.n_embd, ff = h.n_ff_exp, ne = h.n_expert, k = h.n_expert_used, rows = n * k;
  thread_local moe_buffers b;
  float* logits = sized(b.logits, n * ne);
  float* weights = sized(b.weights, rows);
  std::int32_t* experts = sized(b.experts, rows);
  std::int32_t* row_of = sized(b.row_of, rows);  // token t's j-th expert's row in the gathered batch
  // Quantized experts read the tokens' rows through `source` (each quantized once); float ones
  // read a gathered copy.
  const bool by_token = kernels::act_format_for(w.gate_exps.type) != kernels::act_format::f32 &&
                        kernels::act_format_for(w.up_exps.type) != kernels::act_format::f32;
  std::int32_t* source = sized(b.source, rows);
  float* x = by_token ? nullptr : sized(b.x, rows * d);
  float* gate = sized(b.gate, rows * ff);
  float* up = sized(b.up, rows * ff);
  float* down = sized(b.down, rows * d);

  kernels::matmul(pool, w.router.type, w.router.data, w.router.rows, w.router.cols, cur, n, logits, w.router.packed);
  for (std::int64_t t = 0; t < n; ++t) {
    if (w.router_b) kernels::add(logits + t * ne, logits + t * ne, w.router_b.f32(), ne);
    route(h, logits + t * ne, experts + t * k, weights + t * k);
  }
  // Gather: each expert's rows together, its tokens in batch order.
  std::int32_t* first = sized(b.count, ne + 1);
  std::fill(first, first + ne + 1, 0);
  for (std::int64_t i = 0; i < rows; ++i) ++first[experts[i] + 1];
  std::partial_sum(first, first + ne + 1, first);
  b.groups.clear();
  for (std::int32_t e = 0; e < ne; ++e)
    if (first[e + 1] > first[e]) b.groups.push_back({e, first[e], first[e + 1] - first[e]});
  for (std::int64_t i = 0; i < rows; ++i) {
    row_of[i] = first[experts[i]]++;
    source[row_of[i]] = static_cast<std::int32_t>(i / k);
    if (!by_token) std::memcpy(x + row_of[i] * d, cur + i / k * d, static_cast<std::size_t>(d) * sizeof(float));
  }

  const kernels::kernel_table& kt = kernels::active_kernels();
  const kernels::grouped_out gate_up[] = {{w.gate_exps.type, w.gate_exps.data, ff, gate, w.gate_exps.packed},
                                          {w.up_exps.type, w.up_exps.data, ff, up, w.up_exps.packed}};
  // gate := act(gate) * up per expert, as soon as its rows are done, then down from gate: one
  // pool job for the experts' three products.
  auto between = [&](const kernels::expert_rows& g) {
    add_bias(w.gate_exps_b, g.expert, gate, g.first, g.first + g.count, ff);
    add_bias(w.up_exps_b, g.expert, up, g.first, g.first + g.count, ff);
    activate(h, gate + g.first * ff, up + g.first * ff, g.count * ff);
  };
  const kernels::grouped_out down_out{w.down_exps.type, w.down_exps.data, d, down, w.down_exps.packed};
  kernels::matmul_experts(pool, kt, gate_up, down_out, b.groups, d, by_token ? cur : x, by_token ? source : nullptr, gate,
                          std::ref(between));
  for (const kernels::expert_rows& g : b.groups) add_bias(w.down_exps_b, g.expert, down, g.first, g.first + g.count, d);

  // Scatter: each token's experts summed in the router's order, as when it runs alone.
  for_rows(pool, n, k * d, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      float* o = out + t * d;
      std::fill(o, o + d, 0.0f);
      for (std::int64_t j = 0; j < k; ++j) {
        const float wj = weights[t * k + j];
        const float* r = down + row_of[t * k + j] * d;
        for (std::int64_t c = 0; c < d; ++c) o[c] += wj * r[c];
      }
    }
  });
}

void moe_ffn_reference(const layer_weights& w, const hparams& h, const float* cur, std::int64_t n, float* out,
                       bool round_activations) {
  const std::int64_t d = h.n_embd, ff = h.n_ff_exp, ne = h.n_expert, k = h.n_expert_used;
  const std::size_t widest = static_cast<std::size_t>(std::max(d, ff));
  std::vector<float> row(widest), rounded(widest), logits(static_cast<std::size_t>(ne)), weights(static_cast<std::size_t>(k));
  std::vector<std::byte> act_buf(kernels::act_row_bytes(kernels::act_format::q8_32, static_cast<std::int64_t>(widest)) + 64);
  std::vector<float> gate(static_cast<std::size_t>(ff)), up(static_cast<std::size_t>(ff));
  std::vector<std::int32_t> experts(static_cast<std::size_t>(k));
  // Row r of matrix t (cols values) dotted with x, in double.
  auto dot = [&](const tensor_view& t, std::int64_t r, const float* xv) {
    const std::size_t stride = kernels::row_bytes(t.type, t.cols);
    kernels::dequantize_row(t.type, static_cast<const std::byte*>(t.data) + static_cast<std::size_t>(r) * stride, row.data(), t.cols);
    const kernels::act_format fmt = kernels::act_format_for(t.type);
    if (round_activations && fmt != kernels::act_format::f32) {
      void* buf = act_buf.data() + (64 - reinterpret_cast<std::uintptr_t>(act_buf.data()) % 64) % 64;
      const kernels::act_row q = kernels::quantize_activations(fmt, xv, t.cols, buf);
      const std::int64_t group = fmt == kernels::act_format::q8_256 ? 256 : 32;
      for (std::int64_t j = 0; j < t.cols; ++j) rounded[static_cast<std::size_t>(j)] = static_cast<float>(q.qs[j]) * q.d[j / group];
      xv = rounded.data();
    }
    double s = 0;
    for (std::int64_t j = 0; j < t.cols; ++j) s += static_cast<double>(row[static_cast<std::size_t>(j)]) * xv[j];
    return static_cast<float>(s);
  };
  for (std::int64_t t = 0; t < n; ++t) {
    const float* xt = cur + t * d;
    for (std::int64_t e = 0; e < ne; ++e)
      logits[static_cast<std::size_t>(e)] = dot(w.router, e, xt) + (w.router_b ? w.router_b.f32()[e] : 0.0f);
    route(h, logits.data(), experts.data(), weights.data());
    float* o = out + t * d;
    std::fill(o, o + d, 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int32_t e = experts[static_cast<std::size_t>(j)];
      for (std::int64_t r = 0; r < ff; ++r) {
        gate[static_cast<std::size_t>(r)] = dot(w.gate_exps, e * ff + r, xt);
        up[static_cast<std::size_t>(r)] = dot(w.up_exps, e * ff + r, xt);
      }
      add_bias(w.gate_exps_b, e, gate.data(), 0, 1, ff);
      add_bias(w.up_exps_b, e, up.data(), 0, 1, ff);
      activate(h, gate.data(), up.data(), ff);
      for (std::int64_t c = 0; c < d; ++c) {
        const float v = dot(w.down_exps, e * d + c, gate.data()) + (w.down_exps_b ? w.down_exps_b.f32()[e * d + c] : 0.0f);
        o[c] += weights[static_cast<std::size_t>(j)] * v;
      }
    }
  }
}

}  // namespace strata::model
