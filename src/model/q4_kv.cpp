#include "src/model/q4_kv.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/kv_quant.hpp"
#include "kernels/ops.hpp"
#include "src/model/model.hpp"
#include "src/model/session.hpp"

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

void prepare_q4_row(const hparams& h, const float* smooth, const float* key_mean, float* q, float* k, float* v) {
  const int hd = h.head_dim;
  if (smooth) {
    for (int hh = 0; hh < h.n_head; ++hh)
      for (int i = 0; i < hd; ++i) q[hh * hd + i] /= smooth[i];
    for (int hh = 0; hh < h.n_head_kv; ++hh)
      for (int i = 0; i < hd; ++i) k[hh * hd + i] *= smooth[i];
  }
  kernels::rotate_pieces(q, h.q_dim(), kernels::k_qk);
  kernels::rotate_pieces(k, h.kv_dim(), kernels::k_qk);
  if (key_mean)
    for (std::int64_t i = 0; i < h.kv_dim(); ++i) k[i] -= key_mean[i];
  kernels::rotate_pieces(v, h.kv_dim(), kernels::rotation_width(hd));
}

bool q4_centering_applies(const layer_weights& w, const hparams& h, int il) {
  return !h.recurrent(il) && h.attn_softcap == 0.0f && !w.attn_sinks;
}

const float* q4_key_means::layer(int il) const {
  if (m.empty()) return nullptr;
  const float* row = m.data() + static_cast<std::size_t>(il) * static_cast<std::size_t>(kv_dim);
  return std::any_of(row, row + kv_dim, [](float x) { return x != 0.0f; }) ? row : nullptr;
}

std::string_view q4_calibration_text() {
  // Plain prose written for this purpose: ordinary English of several registers, so that the
  // mean key is that of everyday text rather than of one topic.
  return "The town sits where the river bends twice before it reaches the sea. In the morning the fishing boats "
         "go out early, and by noon the market square is full of people buying bread, apples, cheese and fresh "
         "fish. Children walk to school along the old stone bridge, and their teachers often stop to talk with "
         "the baker, who has run the same shop for thirty years.\n\n"
         "Last spring the council decided to repair the library. The roof had leaked for a long time, and many "
         "books on the top shelves were damaged by water. Volunteers spent several weekends sorting them: some "
         "could be dried and saved, others were sent away to be rebound, and a few had to be thrown out. When the "
         "work was finished, the library opened again with a small party, new chairs and a reading corner for "
         "younger visitors.\n\n"
         "How do you plan a garden that grows well all year? First, look at how much sunlight each part of the "
         "ground receives. Then choose plants that suit the soil, and water them in the evening rather than at "
         "midday, when most of the water would simply evaporate. It also helps to write down what you planted "
         "and when, because it is easy to forget by the following season.\n\n"
         "Many people think that learning a new language is hard, but regular practice makes a real difference. "
         "Reading a short story every day, listening to the radio, and speaking with friends, even badly at first, "
         "will slowly build both vocabulary and confidence. After a year, most learners are surprised by how "
         "much they can understand.";
}

result<q4_key_means> calibrate_q4_keys(std::shared_ptr<const model> m, kernels::compute_pool& pool,
                                       std::span<const std::int32_t> tokens) {
  if (tokens.empty()) return fail(errc::invalid_argument, "no tokens to take the mean keys over");
  const hparams& h = m->hp;
  const std::int32_t n = static_cast<std::int32_t>(tokens.size());
  const std::int32_t page_tokens = 32;
  session s(m, pool, n, page_tokens, n, kv::kv_format::f16);
  if (auto r = s.append(tokens, false); !r) return std::move(r).err();
  q4_key_means out;
  out.kv_dim = static_cast<std::int32_t>(h.kv_dim());
  out.m.assign(static_cast<std::size_t>(h.n_layer) * static_cast<std::size_t>(out.kv_dim), 0.0f);
  std::vector<double> sum(static_cast<std::size_t>(out.kv_dim));
  std::vector<float> row(static_cast<std::size_t>(out.kv_dim));
  std::vector<float> q(static_cast<std::size_t>(h.q_dim())), v(static_cast<std::size_t>(out.kv_dim));
  for (int il = 0; il < h.n_layer; ++il) {
    const layer_weights& w = m->weights.layers[static_cast<std::size_t>(il)];
    if (!q4_centering_applies(w, h, il)) continue;
    const layer_kv& kv = s.layer(il);
    std::fill(sum.begin(), sum.end(), 0.0);
    // Position 0 is left out: its key (BOS's) is an outlier that most models attend as a sink.
    const std::int32_t first = n > 1 ? 1 : 0;
    for (std::int32_t p = first; p < n; ++p) {
      // Pages were assigned in order from the f16 array's first id (session).
      const std::int32_t page = kv.space().base(kv::kv_format::f16) + p / page_tokens;
      kernels::convert_row_from_f16(reinterpret_cast<const std::uint16_t*>(kv.k(page, p % page_tokens)), row.data(), out.kv_dim);
      for (std::int32_t i = 0; i < out.kv_dim; ++i) sum[static_cast<std::size_t>(i)] += row[static_cast<std::size_t>(i)];
    }
    for (std::int32_t i = 0; i < out.kv_dim; ++i) row[static_cast<std::size_t>(i)] = static_cast<float>(sum[static_cast<std::size_t>(i)] / (n - first));
    // The mean of the prepared keys is the prepared mean: smoothing and rotation are linear.
    float smooth[kernels::k_attention_max_head_dim];
    std::fill(q.begin(), q.end(), 0.0f);
    std::fill(v.begin(), v.end(), 0.0f);
    prepare_q4_row(h, q4_key_smoothing(w, h, smooth) ? smooth : nullptr, nullptr, q.data(), row.data(), v.data());
    double ss = 0;
    for (float x : row) ss += static_cast<double>(x) * x;
    const double rms = std::sqrt(ss / out.kv_dim);
    if (!(rms > 0) || !std::isfinite(rms)) continue;
    // A power of two between RMS/16 and RMS/8: the grid itself then rarely moves with the RMS.
    const double step = std::exp2(std::floor(std::log2(rms / 8)));
    float* dst = out.m.data() + static_cast<std::size_t>(il) * static_cast<std::size_t>(out.kv_dim);
    for (std::int32_t i = 0; i < out.kv_dim; ++i)
      dst[i] = static_cast<float>(step * std::nearbyint(row[static_cast<std::size_t>(i)] / step));
  }
  return out;
}

void finish_q4_rows(const hparams& h, float* attn, std::int64_t n_rows) {
  kernels::unrotate_pieces(attn, n_rows * h.q_dim(), kernels::rotation_width(h.head_dim));
}

void quantize_q4_row(const float* k, const float* v, std::int64_t kv_dim, void* k_slot, void* v_slot) {
  kernels::quantize_q4_0_fitted(k, static_cast<kernels::block_q4_0*>(k_slot), kv_dim);
  kernels::quantize_q4_0_fitted(v, static_cast<kernels::block_q4_0*>(v_slot), kv_dim);
}

}  // namespace strata::model
