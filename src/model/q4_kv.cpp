#include "src/model/q4_kv.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/kv_quant.hpp"

namespace strata::model {
namespace {

/// The channel that RoPE turns together with channel i (i itself past the rotated ones).
int rope_partner(const hparams& h, int i) {
  if (i >= h.n_rot) return i;
  const int half = h.n_rot / 2;
  return h.rope_neox ? (i < half ? i + half : i - half) : (i ^ 1);
}

/// The RMS of a gain over channel i and its RoPE partner, floored so that a dead channel cannot
/// make a factor infinite.
float pair_gain(const float* g, int i, int p) {
  return std::max(1e-3f, std::sqrt(0.5f * (g[i] * g[i] + g[p] * g[p])));
}

}  // namespace

bool q4_key_smoothing(const layer_weights& w, const hparams& h, float (&s)[kernels::k_attention_max_head_dim]) {
  if (!w.q_norm || !w.k_norm) return false;
  for (int i = 0; i < h.head_dim; ++i) {
    const int p = rope_partner(h, i);
    s[i] = std::sqrt(pair_gain(w.q_norm.f32(), i, p) / pair_gain(w.k_norm.f32(), i, p));
  }
  return true;
}

void prepare_q4_row(const hparams& h, const float* smooth, float* q, float* k, float* v) {
  const int hd = h.head_dim;
  if (smooth) {
    for (int hh = 0; hh < h.n_head; ++hh)
      for (int i = 0; i < hd; ++i) q[hh * hd + i] /= smooth[i];
    for (int hh = 0; hh < h.n_head_kv; ++hh)
      for (int i = 0; i < hd; ++i) k[hh * hd + i] *= smooth[i];
  }
  kernels::rotate_pieces(q, h.q_dim(), kernels::k_qk);
  kernels::rotate_pieces(k, h.kv_dim(), kernels::k_qk);
  kernels::rotate_pieces(v, h.kv_dim(), kernels::rotation_width(hd));
}

void finish_q4_rows(const hparams& h, float* attn, std::int64_t n_rows) {
  kernels::unrotate_pieces(attn, n_rows * h.q_dim(), kernels::rotation_width(h.head_dim));
}

void quantize_q4_row(const float* k, const float* v, std::int64_t kv_dim, void* k_slot, void* v_slot) {
  kernels::quantize_q4_0_fitted(k, static_cast<kernels::block_q4_0*>(k_slot), kv_dim);
  kernels::quantize_q4_0_fitted(v, static_cast<kernels::block_q4_0*>(v_slot), kv_dim);
}

}  // namespace strata::model
