#include "src/model/recurrent_layer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/delta_rule.hpp"
#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "src/model/for_rows.hpp"

namespace strata::model {
namespace {

/// The mixer's activations, per thread, grown to the largest batch seen.
struct mixer_buffers {
  std::vector<float> qkv, conv, z, beta, g, o, taps;
  void fit(const hparams& h, std::int64_t n) {
    taps.resize(static_cast<std::size_t>(h.ssm_conv_dim()) * static_cast<std::size_t>(h.ssm_conv_kernel));
    const auto rows = static_cast<std::size_t>(n);
    qkv.resize(rows * static_cast<std::size_t>(h.ssm_conv_dim()));
    conv.resize(qkv.size());
    z.resize(rows * static_cast<std::size_t>(h.ssm_inner));
    o.resize(z.size());
    beta.resize(rows * static_cast<std::size_t>(h.ssm_v_heads));
    g.resize(beta.size());
  }
};

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

/// One sequence's delta rule in head hv: chunked over its rows, or the recurrence for one row.
void delta_head(const hparams& h, const seq_rows& sq, int hv, mixer_buffers& b, float* state, int chunk) {
  const std::int64_t cd = h.ssm_conv_dim(), S = h.ssm_state;
  const int hk = hv % h.ssm_k_heads;
  const float* row0 = b.conv.data() + sq.first_row * cd;
  kernels::delta_rule_rows r;
  r.q = row0 + hk * S;
  r.k = row0 + h.ssm_key_dim() + hk * S;
  r.v = row0 + 2 * h.ssm_key_dim() + hv * S;
  r.qkv_stride = cd;
  r.g = b.g.data() + sq.first_row * h.ssm_v_heads + hv;
  r.beta = b.beta.data() + sq.first_row * h.ssm_v_heads + hv;
  r.gb_stride = h.ssm_v_heads;
  r.out = b.o.data() + sq.first_row * h.ssm_inner + hv * S;
  r.out_stride = h.ssm_inner;
  r.n = sq.n_rows;
  r.pos = sq.start_pos;
  const kernels::kernel_table& kt = kernels::active_kernels();
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  if (sq.n_rows == 1) {
    kernels::delta_rule_recurrent(kt, r, h.ssm_state, scale, state);
    return;
  }
  thread_local std::vector<float> work;  // this worker's
  work.resize(kernels::delta_rule_work_floats(h.ssm_state));
  kernels::delta_rule_chunked(kt, r, h.ssm_state, scale, state, work.data(), chunk);
}

}  // namespace

void recurrent_mixer(const layer_weights& w, const hparams& h, int il, const batch_view& batch, const float* cur, float* out,
                     recurrent_state& state, kernels::compute_pool& pool) {
  const std::int64_t n = batch.n_rows, cd = h.ssm_conv_dim(), S = h.ssm_state, hvs = h.ssm_v_heads;
  thread_local mixer_buffers this_threads;
  mixer_buffers& b = this_threads;  // the pool's workers see the calling thread's buffers through this
  b.fit(h, n);
  std::array<kernels::matmul_out, 4> outs{
      kernels::matmul_out{w.wqkv.type, w.wqkv.data, w.wqkv.rows, b.qkv.data(), w.wqkv.packed},
      kernels::matmul_out{w.attn_gate.type, w.attn_gate.data, w.attn_gate.rows, b.z.data(), w.attn_gate.packed},
      kernels::matmul_out{w.ssm_beta.type, w.ssm_beta.data, w.ssm_beta.rows, b.beta.data(), w.ssm_beta.packed},
      kernels::matmul_out{w.ssm_alpha.type, w.ssm_alpha.data, w.ssm_alpha.rows, b.g.data(), w.ssm_alpha.packed}};
  kernels::matmul_many(pool, kernels::active_kernels(), outs, h.n_embd, cur, n);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t hh = 0; hh < hvs; ++hh) {
      float& beta = b.beta[static_cast<std::size_t>(i * hvs + hh)];
      float& g = b.g[static_cast<std::size_t>(i * hvs + hh)];
      beta = sigmoid(beta);
      g = softplus(g + w.ssm_dt.f32()[hh]) * w.ssm_a.f32()[hh];
    }
  }
  // The convolution, each sequence from its own rows; then q and k to unit length.
  conv_sequences(w.ssm_conv1d, h, il, batch, b.qkv.data(), cd, b.taps.data(), b.conv.data(), state, pool);
  for_rows(pool, n, cd, [&](std::int64_t r0, std::int64_t r1) {
    kernels::silu(b.conv.data() + r0 * cd, (r1 - r0) * cd);
    for (std::int64_t i = r0; i < r1; ++i) kernels::l2_norm_heads(b.conv.data() + i * cd, 2 * h.ssm_k_heads, h.ssm_state, h.norm_eps);
  });
  // The delta rule: every (sequence, value head) on its own.
  const auto n_seqs = static_cast<std::int64_t>(batch.seqs.size());
  auto run = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const seq_rows& sq = batch.seqs[static_cast<std::size_t>(task / hvs)];
      const int hv = static_cast<int>(task % hvs);
      delta_head(h, sq, hv, b, state.delta(il, sq.state_slot) + hv * S * S, state.rule_chunk());
    }
  };
  if (pool.size() > 1 && n_seqs * hvs > 1 && n * S * S >= (1 << 14)) pool.run_split(n_seqs * hvs, 1, run);
  else run(0, n_seqs * hvs);
  // The output norm per head, gated by silu(z), then the output projection.
  for_rows(pool, n, h.ssm_inner, [&](std::int64_t r0, std::int64_t r1) {
    kernels::silu(b.z.data() + r0 * h.ssm_inner, (r1 - r0) * h.ssm_inner);
    for (std::int64_t i = r0 * hvs; i < r1 * hvs; ++i) {
      float* o = b.o.data() + i * S;
      kernels::rms_norm(o, w.ssm_norm.f32(), o, S, h.norm_eps);
      kernels::mul(o, o, b.z.data() + i * S, S);
    }
  });
  kernels::matmul(pool, w.ssm_out.type, w.ssm_out.data, w.ssm_out.rows, w.ssm_out.cols, b.o.data(), n, out, w.ssm_out.packed);
}

void conv_sequences(const tensor_view& conv1d, const hparams& h, int il, const batch_view& batch, const float* x, std::int64_t x_stride,
                    float* taps, float* out, recurrent_state& state, kernels::compute_pool& pool) {
  const std::int64_t cd = h.ssm_conv_dim();
  for (const seq_rows& sq : batch.seqs)
    if (sq.state_slot < 0 || sq.state_slot >= state.slots()) throw std::out_of_range("recurrent layer: state slot out of range");
  kernels::conv_taps_major(conv1d.f32(), cd, h.ssm_conv_kernel, taps);
  constexpr std::int64_t k_channel_grain = 64;
  const std::int64_t channel_blocks = (cd + k_channel_grain - 1) / k_channel_grain;
  for_rows(pool, channel_blocks, batch.n_rows * k_channel_grain, [&](std::int64_t cb, std::int64_t ce) {
    const std::int64_t c0 = cb * k_channel_grain, c1 = std::min(cd, ce * k_channel_grain);
    for (const seq_rows& sq : batch.seqs)
      kernels::causal_conv(x + sq.first_row * x_stride, x_stride, sq.n_rows, cd, c0, c1, taps, h.ssm_conv_kernel, state.conv(il, sq.state_slot),
                           out + sq.first_row * cd, cd);
  });
}

void split_query_gate(float* qg, float* q, std::int64_t n, const hparams& h) {
  const std::int64_t hd = h.head_dim, qd = h.q_dim();
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t hh = 0; hh < h.n_head; ++hh) {
      const float* src = qg + i * 2 * qd + hh * 2 * hd;
      std::copy(src, src + hd, q + i * qd + hh * hd);
      // Compacted in place: the destination never passes a value not yet moved.
      std::copy(src + hd, src + 2 * hd, qg + i * qd + hh * hd);
    }
  }
}

void apply_output_gate(float* attn, const float* gate, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) attn[i] *= sigmoid(gate[i]);
}

}  // namespace strata::model
