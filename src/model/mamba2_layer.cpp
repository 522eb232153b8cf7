#include "src/model/mamba2_layer.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/delta_rule.hpp"
#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "kernels/ssm_scan.hpp"
#include "src/model/for_rows.hpp"
#include "src/model/recurrent_layer.hpp"

namespace strata::model {
namespace {

/// The mixer's activations, per thread, grown to the largest batch seen.
struct mamba2_buffers {
  std::vector<float> zxbcdt, conv, dt, y, taps;
  void fit(const hparams& h, std::int64_t n) {
    const auto rows = static_cast<std::size_t>(n);
    taps.resize(static_cast<std::size_t>(h.ssm_conv_dim()) * static_cast<std::size_t>(h.ssm_conv_kernel));
    zxbcdt.resize(rows * static_cast<std::size_t>(in_proj(h)));
    conv.resize(rows * static_cast<std::size_t>(h.ssm_conv_dim()));
    dt.resize(rows * static_cast<std::size_t>(h.ssm_v_heads));
    y.resize(rows * static_cast<std::size_t>(h.ssm_inner));
  }
  /// Values per row of W_in's output: z, x|B|C, dt.
  static std::int64_t in_proj(const hparams& h) { return static_cast<std::int64_t>(h.ssm_inner) + h.ssm_conv_dim() + h.ssm_v_heads; }
};

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// The scan takes the delta rule's chunk length (recurrent_state::rule_chunk), so every length
// kernels::delta_rule_chunk_for gives must be one ssm_scan_chunked accepts.
static_assert(kernels::k_ssm_scan_max_chunk >= kernels::k_delta_rule_max_chunk);

/// One sequence's scan in head hd: chunked over its rows, or the recurrence for one row.
void scan_head(const hparams& h, const seq_rows& sq, int head, float a, mamba2_buffers& b, float* state, int chunk) {
  const std::int64_t cd = h.ssm_conv_dim(), hd = h.ssm_head_dim(), ds = h.ssm_state;
  const std::int64_t g = head / (h.ssm_v_heads / h.ssm_k_heads);
  const float* row0 = b.conv.data() + sq.first_row * cd;
  kernels::ssm_scan_rows r;
  r.x = row0 + head * hd;
  r.x_stride = cd;
  r.B = row0 + h.ssm_inner + g * ds;
  r.C = row0 + h.ssm_inner + h.ssm_key_dim() + g * ds;
  r.bc_stride = cd;
  r.dt = b.dt.data() + sq.first_row * h.ssm_v_heads + head;
  r.dt_stride = h.ssm_v_heads;
  r.y = b.y.data() + sq.first_row * h.ssm_inner + head * hd;
  r.y_stride = h.ssm_inner;
  r.n = sq.n_rows;
  r.pos = sq.start_pos;
  if (sq.n_rows == 1) {
    kernels::ssm_scan_recurrent(r, static_cast<int>(hd), h.ssm_state, a, state);
    return;
  }
  thread_local std::vector<float> work;  // this worker's
  work.resize(kernels::ssm_scan_work_floats(static_cast<int>(hd)));
  kernels::ssm_scan_chunked(kernels::active_kernels(), r, static_cast<int>(hd), h.ssm_state, a, state, work.data(), chunk);
}

}  // namespace

void mamba2_mixer(const layer_weights& w, const hparams& h, int il, const batch_view& batch, const float* cur, float* out,
                  recurrent_state& state, kernels::compute_pool& pool) {
  const std::int64_t n = batch.n_rows, cd = h.ssm_conv_dim(), di = h.ssm_inner, nh = h.ssm_v_heads, hd = h.ssm_head_dim();
  const std::int64_t ip = mamba2_buffers::in_proj(h), group = di / h.ssm_k_heads;
  thread_local mamba2_buffers this_threads;
  mamba2_buffers& b = this_threads;  // the pool's workers see the calling thread's buffers through this
  b.fit(h, n);
  kernels::matmul(pool, w.ssm_in.type, w.ssm_in.data, w.ssm_in.rows, w.ssm_in.cols, cur, n, b.zxbcdt.data(), w.ssm_in.packed);
  // The convolution of x|B|C, each sequence from its own rows.
  conv_sequences(w.ssm_conv1d, h, il, batch, b.zxbcdt.data() + di, ip, b.taps.data(), b.conv.data(), state, pool);
  // Bias and silu on x|B|C, and each head's step.
  for_rows(pool, n, cd, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) {
      float* c = b.conv.data() + i * cd;
      if (w.ssm_conv1d_b) kernels::add(c, c, w.ssm_conv1d_b.f32(), cd);
      kernels::silu(c, cd);
      const float* dt = b.zxbcdt.data() + i * ip + di + cd;
      for (std::int64_t hh = 0; hh < nh; ++hh) b.dt[static_cast<std::size_t>(i * nh + hh)] = softplus(dt[hh] + w.ssm_dt.f32()[hh]);
    }
  });
  // The scan: every (sequence, head) on its own.
  const auto n_seqs = static_cast<std::int64_t>(batch.seqs.size());
  auto run = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const seq_rows& sq = batch.seqs[static_cast<std::size_t>(task / nh)];
      const int head = static_cast<int>(task % nh);
      scan_head(h, sq, head, w.ssm_a.f32()[head], b, state.delta(il, sq.state_slot) + head * hd * h.ssm_state, state.rule_chunk());
    }
  };
  if (pool.size() > 1 && n_seqs * nh > 1 && n * di * h.ssm_state >= (1 << 14)) pool.run_split(n_seqs * nh, 1, run);
  else run(0, n_seqs * nh);
  // y + D x, gated by silu(z), the grouped norm, then the output projection.
  for_rows(pool, n, di, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) {
      float* y = b.y.data() + i * di;
      float* z = b.zxbcdt.data() + i * ip;
      const float* x = b.conv.data() + i * cd;
      for (std::int64_t hh = 0; hh < nh; ++hh) {
        const float d = w.ssm_d.f32()[hh];
        for (std::int64_t j = hh * hd; j < (hh + 1) * hd; ++j) y[j] += d * x[j];
      }
      kernels::silu(z, di);
      kernels::mul(y, y, z, di);
      for (std::int64_t g = 0; g < h.ssm_k_heads; ++g)
        kernels::rms_norm(y + g * group, w.ssm_norm.f32() + g * group, y + g * group, group, h.norm_eps);
    }
  });
  kernels::matmul(pool, w.ssm_out.type, w.ssm_out.data, w.ssm_out.rows, w.ssm_out.cols, b.y.data(), n, out, w.ssm_out.packed);
}

}  // namespace strata::model
