#include "src/model/forward.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::model {
namespace {

/// Per-thread activations, grown to the largest batch seen and then reused.
struct scratch {
  std::vector<float> cur, q, k, v, attn, out, gate, up;
  static scratch& get() {
    thread_local scratch s;
    return s;
  }
};

float* sized(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

void matmul(kernels::compute_pool& pool, const tensor_view& w, const float* x, std::int64_t n, float* y) {
  kernels::matmul(pool, w.type, w.data, w.rows, w.cols, x, n, y);
}

void add_bias(float* y, const tensor_view& b, std::int64_t n, std::int64_t dim) {
  if (!b) return;
  for (std::int64_t i = 0; i < n; ++i) kernels::add(y + i * dim, y + i * dim, b.f32(), dim);
}

/// One (row, head) of attention over the sequence's pages: out = softmax(q.K * scale) V.
void attend_one(const hparams& h, const layer_kv& kv, const seq_rows& s, std::int32_t pos, bool sliding, const float* q,
                int head, float* out) {
  const kernels::kernel_table& kt = kernels::active_kernels();
  thread_local std::vector<float> scores, row;
  const int hd = h.head_dim;
  const int kvh = head / (h.n_head / h.n_head_kv);
  const std::int32_t first = sliding ? std::max<std::int32_t>(0, pos - h.sliding_window + 1) : 0;
  const std::int32_t n = pos - first + 1;
  float* sc = sized(scores, static_cast<std::size_t>(n));
  float* tmp = sized(row, static_cast<std::size_t>(hd));
  const std::int32_t pt = kv.page_tokens();
  for (std::int32_t t = 0; t < n; ++t) {
    std::int32_t p = first + t;
    kt.f16_to_f32(kv.k(s.blocks[p / pt], p % pt) + kvh * hd, tmp, hd);
    sc[t] = kt.dot(q, tmp, hd) * h.attn_scale;
  }
  if (h.attn_softcap > 0) kernels::soft_cap(sc, n, h.attn_softcap);
  kernels::softmax(sc, n);
  std::fill(out, out + hd, 0.0f);
  for (std::int32_t t = 0; t < n; ++t) {
    std::int32_t p = first + t;
    kt.f16_to_f32(kv.v(s.blocks[p / pt], p % pt) + kvh * hd, tmp, hd);
    kt.axpy(sc[t], tmp, out, hd);
  }
}

}  // namespace

void embed(const model& m, const std::int32_t* tokens, std::int32_t n, float* hidden) {
  const tensor_view& e = m.weights.token_embd;
  const std::size_t stride = kernels::row_bytes(e.type, e.cols);
  for (std::int32_t i = 0; i < n; ++i) {
    std::int32_t t = std::clamp<std::int32_t>(tokens[i], 0, m.hp.n_vocab - 1);
    kernels::dequantize_row(e.type, static_cast<const std::byte*>(e.data) + static_cast<std::size_t>(t) * stride,
                            hidden + static_cast<std::size_t>(i) * e.cols, e.cols);
    if (m.hp.embed_scale != 1.0f) kernels::scale(hidden + static_cast<std::size_t>(i) * e.cols, e.cols, m.hp.embed_scale);
  }
}

void layer_forward(const model& m, int il, const batch_view& batch, float* hidden, layer_kv& kv,
                   kernels::compute_pool& pool) {
  const hparams& h = m.hp;
  const layer_weights& L = m.weights.layers[static_cast<std::size_t>(il)];
  const std::int64_t n = batch.n_rows, d = h.n_embd, qd = h.q_dim(), kvd = h.kv_dim(), ff = h.n_ff;
  scratch& s = scratch::get();
  float* cur = sized(s.cur, n * d);
  float* q = sized(s.q, n * qd);
  float* k = sized(s.k, n * kvd);
  float* v = sized(s.v, n * kvd);
  float* attn = sized(s.attn, n * qd);
  float* out = sized(s.out, n * d);

  // Attention block.
  for (std::int64_t i = 0; i < n; ++i) kernels::rms_norm(hidden + i * d, L.attn_norm.f32(), cur + i * d, d, h.norm_eps);
  if (L.wqkv) {
    float* qkv = sized(s.gate, n * (qd + 2 * kvd));
    matmul(pool, L.wqkv, cur, n, qkv);
    for (std::int64_t i = 0; i < n; ++i) {
      const float* r = qkv + i * (qd + 2 * kvd);
      std::copy(r, r + qd, q + i * qd);
      std::copy(r + qd, r + qd + kvd, k + i * kvd);
      std::copy(r + qd + kvd, r + qd + 2 * kvd, v + i * kvd);
    }
  } else {
    matmul(pool, L.wq, cur, n, q);
    matmul(pool, L.wk, cur, n, k);
    matmul(pool, L.wv, cur, n, v);
  }
  add_bias(q, L.bq, n, qd);
  add_bias(k, L.bk, n, kvd);
  add_bias(v, L.bv, n, kvd);

  for (const seq_rows& sq : batch.seqs) {
    for (std::int32_t r = 0; r < sq.n_rows; ++r) {
      const std::int64_t row = sq.first_row + r;
      const std::int32_t pos = sq.start_pos + r;
      float* qr = q + row * qd;
      float* kr = k + row * kvd;
      if (L.q_norm) {
        for (int hh = 0; hh < h.n_head; ++hh) kernels::rms_norm(qr + hh * h.head_dim, L.q_norm.f32(), qr + hh * h.head_dim, h.head_dim, h.norm_eps);
        for (int hh = 0; hh < h.n_head_kv; ++hh) kernels::rms_norm(kr + hh * h.head_dim, L.k_norm.f32(), kr + hh * h.head_dim, h.head_dim, h.norm_eps);
      }
      kernels::rope(qr, h.n_head, h.head_dim, h.n_rot, pos, h.rope_freq_base, h.rope_freq_scale, h.rope_neox);
      kernels::rope(kr, h.n_head_kv, h.head_dim, h.n_rot, pos, h.rope_freq_base, h.rope_freq_scale, h.rope_neox);
      const std::int32_t page = sq.blocks[pos / kv.page_tokens()], slot = pos % kv.page_tokens();
      std::uint16_t* kd = kv.k(page, slot);
      std::uint16_t* vd = kv.v(page, slot);
      const float* vr = v + row * kvd;
      for (std::int64_t j = 0; j < kvd; ++j) {
        kd[j] = kernels::fp32_to_fp16(kr[j]);
        vd[j] = kernels::fp32_to_fp16(vr[j]);
      }
    }
  }

  // Every (row, head) pair is independent: spread them over the pool.
  const bool sliding = h.sliding(il);
  const std::int64_t items = n * h.n_head;
  auto attend_range = [&](std::int64_t b, std::int64_t e) {
    std::size_t si = 0;
    for (std::int64_t it = b; it < e; ++it) {
      const std::int64_t row = it / h.n_head;
      const int head = static_cast<int>(it % h.n_head);
      while (row >= batch.seqs[si].first_row + batch.seqs[si].n_rows) ++si;
      const seq_rows& sq = batch.seqs[si];
      const std::int32_t pos = sq.start_pos + static_cast<std::int32_t>(row - sq.first_row);
      attend_one(h, kv, sq, pos, sliding, q + row * qd + head * h.head_dim, head, attn + row * qd + head * h.head_dim);
    }
  };
  if (items * (batch.seqs.empty() ? 1 : batch.seqs[0].start_pos + 1) < 256) {
    attend_range(0, items);
  } else {
    pool.run([&](int ith, int nth) {
      std::int64_t b, e;
      kernels::compute_pool::split(items, 1, ith, nth, b, e);
      if (b < e) attend_range(b, e);
    });
  }
  matmul(pool, L.wo, attn, n, out);
  if (L.post_attn_norm)
    for (std::int64_t i = 0; i < n; ++i) kernels::rms_norm(out + i * d, L.post_attn_norm.f32(), out + i * d, d, h.norm_eps);
  kernels::add(hidden, hidden, out, n * d);

  // Feed-forward block.
  for (std::int64_t i = 0; i < n; ++i) kernels::rms_norm(hidden + i * d, L.ffn_norm.f32(), cur + i * d, d, h.norm_eps);
  float* gate = sized(s.gate, n * ff * (L.gate_up ? 2 : 1));
  float* up = sized(s.up, n * ff);
  if (L.gate_up) {
    matmul(pool, L.gate_up, cur, n, gate);  // each row: gate (ff) then up (ff)
    for (std::int64_t i = n - 1; i >= 0; --i) {
      std::copy(gate + i * 2 * ff + ff, gate + i * 2 * ff + 2 * ff, up + i * ff);
      std::copy(gate + i * 2 * ff, gate + i * 2 * ff + ff, gate + i * ff);
    }
  } else {
    matmul(pool, L.gate, cur, n, gate);
    matmul(pool, L.up, cur, n, up);
  }
  if (h.architecture == arch::gemma2) kernels::gelu(gate, n * ff);
  else kernels::silu(gate, n * ff);
  kernels::mul(gate, gate, up, n * ff);
  matmul(pool, L.down, gate, n, out);
  if (L.post_ffn_norm)
    for (std::int64_t i = 0; i < n; ++i) kernels::rms_norm(out + i * d, L.post_ffn_norm.f32(), out + i * d, d, h.norm_eps);
  kernels::add(hidden, hidden, out, n * d);
}

void output_logits(const model& m, const float* hidden, std::span<const std::int32_t> rows, float* logits,
                   kernels::compute_pool& pool) {
  const hparams& h = m.hp;
  const std::int64_t d = h.n_embd, n = static_cast<std::int64_t>(rows.size());
  float* cur = sized(scratch::get().cur, n * d);
  for (std::int64_t i = 0; i < n; ++i)
    kernels::rms_norm(hidden + static_cast<std::int64_t>(rows[static_cast<std::size_t>(i)]) * d, m.weights.output_norm.f32(),
                      cur + i * d, d, h.norm_eps);
  matmul(pool, m.weights.output, cur, n, logits);
  if (h.final_softcap > 0) kernels::soft_cap(logits, n * h.n_vocab, h.final_softcap);
}

}  // namespace strata::model
