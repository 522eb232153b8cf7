#include "src/model/forward.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>

#include "kernels/attention.hpp"
#include "kernels/matmul.hpp"
#include "kernels/ops.hpp"
#include "kernels/packed_x16.hpp"
#include "kernels/quants.hpp"
#include "src/model/attention_sinks.hpp"
#include "src/model/for_rows.hpp"
#include "src/model/mamba2_layer.hpp"
#include "src/model/moe_ffn.hpp"
#include "src/model/q4_kv.hpp"
#include "src/model/recurrent_layer.hpp"

namespace strata::model {

/// The forward functions' way into scratch's buffers.
struct forward_access {
  static float* cur(scratch& s) { return s.cur_.data(); }
  static float* q(scratch& s) { return s.q_.data(); }
  static float* k(scratch& s) { return s.k_.data(); }
  static float* v(scratch& s) { return s.v_.data(); }
  static float* attn(scratch& s) { return s.attn_.data(); }
  static float* out(scratch& s) { return s.out_.data(); }
  static float* gate(scratch& s) { return s.gate_.data(); }
  static float* up(scratch& s) { return s.up_.data(); }
  static std::vector<seq_rows>& slice(scratch& s) { return s.slice_; }
};

scratch::scratch(const hparams& h, std::int32_t max_rows)
    : max_rows_(std::max<std::int32_t>(1, max_rows)), n_embd_(h.n_embd), q_dim_(h.q_dim()), kv_dim_(h.kv_dim()), n_ff_(h.n_ff) {
  const auto n = static_cast<std::size_t>(max_rows_);
  cur_.resize(n * static_cast<std::size_t>(n_embd_));
  q_.resize(n * static_cast<std::size_t>(q_dim_));
  k_.resize(n * static_cast<std::size_t>(kv_dim_));
  v_.resize(n * static_cast<std::size_t>(kv_dim_));
  attn_.resize(n * static_cast<std::size_t>(q_dim_));
  out_.resize(n * static_cast<std::size_t>(n_embd_));
  // gate holds the fused gate+up (phi3), the fused qkv rows, or the queries and their gates
  // (gated attention), whichever is wider.
  gate_.resize(n * static_cast<std::size_t>(std::max({2 * n_ff_, q_dim_ + 2 * kv_dim_, 2 * q_dim_})));
  up_.resize(n * static_cast<std::size_t>(n_ff_));
  slice_.reserve(64);
}

bool scratch::fits(const hparams& h) const {
  return n_embd_ == h.n_embd && q_dim_ == h.q_dim() && kv_dim_ == h.kv_dim() && n_ff_ == h.n_ff;
}

namespace {

using fa = forward_access;

void matmul(kernels::compute_pool& pool, const tensor_view& w, const float* x, std::int64_t n, float* y) {
  kernels::matmul(pool, w.type, w.data, w.rows, w.cols, x, n, y, w.packed);
}

/// Several weights with the same columns against the same x (see kernels::matmul_many).
void matmul_many(kernels::compute_pool& pool, std::initializer_list<std::pair<const tensor_view*, float*>> ws, const float* x,
                 std::int64_t n) {
  std::array<kernels::matmul_out, kernels::k_matmul_max_outputs> outs;
  std::size_t count = 0;
  for (const auto& [w, y] : ws) outs.at(count++) = kernels::matmul_out{w->type, w->data, w->rows, y, w->packed};
  kernels::matmul_many(pool, kernels::active_kernels(), std::span(outs.data(), count), ws.begin()->first->cols, x, n);
}

/// Rows [r0, r1) of y = rms_norm(x) * w.
void rms_norm_rows(const float* x, const tensor_view& w, float* y, std::int64_t r0, std::int64_t r1, std::int64_t dim, float eps) {
  for (std::int64_t i = r0; i < r1; ++i) kernels::rms_norm(x + i * dim, w.f32(), y + i * dim, dim, eps);
}

/// The rotary angles of position pos with layer il's base and scale (kernels::rope_angles, or
/// rope_angles_yarn): cs, or the same values from this thread's cache. Every layer of one base
/// rotates a prefill's rows by the same angles (Gemma 3: two bases over 18 layers), so each
/// thread keeps, for the last two keys (base, scale, n_rot, YaRN), the angles of the last
/// k_positions positions it computed. Per-frequency factors are weights of one model (no key
/// tells them apart): those angles are computed each time.
const float* rope_angles_of(const layer_weights& w, const hparams& h, int il, std::int32_t pos, float* cs) {
  const float base = h.rope_base(il), scale = h.rope_scale(il);
  const kernels::yarn_params& y = h.yarn;
  auto compute = [&](float* out) {
    if (y.ext_factor != 0) kernels::rope_angles_yarn(pos, h.n_rot, base, scale, y, out);
    else kernels::rope_angles(pos, h.n_rot, base, scale, w.rope_freqs ? w.rope_freqs.f32() : nullptr, out);
  };
  if (w.rope_freqs) {
    compute(cs);
    return cs;
  }
  constexpr std::int32_t k_positions = 512;
  struct slot {
    float base = 0, scale = 0;
    int n_rot = 0;
    kernels::yarn_params yarn;
    std::vector<float> cs;
    std::vector<std::int32_t> pos;
    bool matches(float b, float sc, int nr, const kernels::yarn_params& v) const {
      return base == b && scale == sc && n_rot == nr && yarn == v;
    }
  };
  thread_local std::array<slot, 2> slots;
  thread_local int oldest = 0;
  slot* s = slots[0].matches(base, scale, h.n_rot, y) ? &slots[0] : slots[1].matches(base, scale, h.n_rot, y) ? &slots[1] : nullptr;
  if (!s) {
    s = &slots[static_cast<std::size_t>(oldest)];
    oldest ^= 1;
    *s = slot{base, scale, h.n_rot, y, {}, {}};
    s->cs.resize(static_cast<std::size_t>(k_positions) * static_cast<std::size_t>(h.n_rot));
    s->pos.assign(k_positions, -1);
  }
  const auto i = static_cast<std::size_t>(pos % k_positions);
  float* row = s->cs.data() + i * static_cast<std::size_t>(h.n_rot);
  if (s->pos[i] != pos) {
    compute(row);
    s->pos[i] = pos;
  }
  return row;
}

/// Biases, Q/K norms, RoPE (with layer il's base and scale), then the row's K and V into its page
/// slot, in the page's format: f16, or quantized straight from f32 (no f16 copy of a quantized
/// sequence's KV ever exists). For q4_0 pages the row's query, key and value are first smoothed
/// and rotated, and the key centered (prepare_q4_row, with q4_smooth from q4_key_smoothing or
/// null, and the layer's kv.q4_key_mean()): attention is unchanged
/// and K and V quantize with less error. Rows [r0, r1) of the batch; each row writes only its own
/// slot, so disjoint ranges can run at once.
void prepare_rows(const layer_weights& w, const hparams& h, int il, const batch_view& batch, float* q, float* k, float* v,
                  layer_kv& kv, std::int64_t r0, std::int64_t r1, const float* q4_smooth) {
  const std::int64_t qd = h.q_dim(), kvd = h.kv_dim();
  float cs_buf[kernels::k_attention_max_head_dim];  // n_rot <= head_dim (hparams checks both)
  for (const seq_rows& sq : batch.seqs) {
    if (sq.first_row + sq.n_rows <= r0 || sq.first_row >= r1) continue;
    const kv::kv_format format = kv.format_of(sq.blocks[0]);
    const std::int32_t rb = static_cast<std::int32_t>(std::max<std::int64_t>(0, r0 - sq.first_row));
    const std::int32_t re = static_cast<std::int32_t>(std::min<std::int64_t>(sq.n_rows, r1 - sq.first_row));
    for (std::int32_t r = rb; r < re; ++r) {
      const std::int64_t row = sq.first_row + r;
      const std::int32_t pos = sq.start_pos + r;
      float* qr = q + row * qd;
      float* kr = k + row * kvd;
      float* vr = v + row * kvd;
      if (w.bq) kernels::add(qr, qr, w.bq.f32(), qd);
      if (w.bk) kernels::add(kr, kr, w.bk.f32(), kvd);
      if (w.bv) kernels::add(vr, vr, w.bv.f32(), kvd);
      if (w.q_norm) {
        for (int hh = 0; hh < h.n_head; ++hh)
          kernels::rms_norm(qr + hh * h.head_dim, w.q_norm.f32(), qr + hh * h.head_dim, h.head_dim, h.norm_eps);
        for (int hh = 0; hh < h.n_head_kv; ++hh)
          kernels::rms_norm(kr + hh * h.head_dim, w.k_norm.f32(), kr + hh * h.head_dim, h.head_dim, h.norm_eps);
      }
      if (h.use_rope) {
        const float* cs = rope_angles_of(w, h, il, pos, cs_buf);
        kernels::rope_rotate(qr, h.n_head, h.head_dim, h.n_rot, cs, h.rope_neox);
        kernels::rope_rotate(kr, h.n_head_kv, h.head_dim, h.n_rot, cs, h.rope_neox);
      }
      const std::int32_t page = sq.blocks[pos / kv.page_tokens()], slot = pos % kv.page_tokens();
      switch (format) {
        case kv::kv_format::f16:
          kernels::convert_row_to_f16(kr, reinterpret_cast<std::uint16_t*>(kv.k(page, slot)), kvd);
          kernels::convert_row_to_f16(vr, reinterpret_cast<std::uint16_t*>(kv.v(page, slot)), kvd);
          break;
        case kv::kv_format::q8_0:
          kernels::quantize_row(kernels::dtype::q8_0, kr, kv.k(page, slot), kvd);
          kernels::quantize_row(kernels::dtype::q8_0, vr, kv.v(page, slot), kvd);
          break;
        case kv::kv_format::q4_0:
          if (kv.rotate_q4()) prepare_q4_row(h, q4_smooth, kv.q4_key_mean(), qr, kr, vr);
          quantize_q4_row(kr, vr, kvd, kv.k(page, slot), kv.v(page, slot));
          break;
      }
    }
  }
}

/// The view of one sequence's pages for the attention kernels.
kernels::kv_page_view page_view(const hparams& h, const layer_kv& kv, const std::int32_t* blocks) {
  const kv::kv_format format = kv.format_of(blocks[0]);
  const std::int64_t row_bytes = kv.row_bytes(format);
  return {kv.k_pages(format), kv.v_pages(format), kv.page_tokens() * row_bytes, row_bytes, row_bytes / h.n_head_kv,
          kv.page_tokens(), blocks, kv.space().base(format),
          format == kv::kv_format::f16 ? kernels::dtype::f16 : format == kv::kv_format::q8_0 ? kernels::dtype::q8_0 : kernels::dtype::q4_0};
}

/// Reads positions [first, last] of a sequence's K and V pages in page order (whole 256-byte runs,
/// what sum_words takes: the few lines of a page's tail may be left), bringing them into this
/// core's cache at the memory's pace. The attention kernels walk one kv head's slice of each row
/// at a time: a strided walk that the hardware prefetchers follow poorly, and a layer's KV is never
/// in cache by the time it attends (the weights have streamed through the cache since).
void read_pages(const kernels::kv_page_view& kv, std::int32_t first, std::int32_t last) {
  const auto sum = kernels::active_kernels().sum_words[0];
  for (std::int32_t t = first; t <= last;) {
    const std::int32_t slot = t % kv.page_tokens;
    const std::int32_t n = std::min(kv.page_tokens - slot, last - t + 1);
    const std::int64_t offset = static_cast<std::int64_t>(kv.blocks[t / kv.page_tokens] - kv.block_offset) * kv.page_bytes + slot * kv.row_bytes;
    const std::int64_t words = n * kv.row_bytes / 256 * 32;
    (void)sum(reinterpret_cast<const std::uint64_t*>(kv.k + offset), words);
    (void)sum(reinterpret_cast<const std::uint64_t*>(kv.v + offset), words);
    t += n;
  }
}

/// The first position row `pos` attends in layer il.
std::int32_t first_attended(const hparams& h, int il, std::int32_t pos) {
  return h.sliding(il) ? std::max<std::int32_t>(0, pos - h.sliding_window + 1) : 0;
}

/// One decode row, a span (kernels::attention_span) at a time: the workers take its spans one by one
/// (all of them on one thread when there is one span or one worker), each reading a span's pages
/// (read_pages) and then attending every head over them, and the spans' results fold in position
/// order. Each core then reads only its own range, in whole rows at the memory's pace, and attends
/// from its cache (walking a kv head's slice of each row straight from memory stalls on every
/// tile); and the row gets the very bits the kernel gives it in one call (a prefill chunk), which
/// folds the same spans the same way. Returns false (and does nothing) for any other batch. lse,
/// when set, gets the row's log-sum-exp per head.
bool attend_one_row_split(const hparams& h, const kernels::attention_shape& shape, int il, const batch_view& batch,
                          const float* q, float* attn, float* lse_out, const layer_kv& kv, kernels::compute_pool& pool) {
  if (batch.n_rows != 1) return false;
  const seq_rows& sq = batch.seqs[0];
  const kernels::kv_page_view view = page_view(h, kv, sq.blocks);
  const std::int32_t pos = sq.start_pos, first = first_attended(h, il, pos), span = kernels::attention_span(view);
  const std::int32_t first_span = first / span, spans = pos / span - first_span + 1;
  const std::int64_t qd = h.q_dim();
  thread_local std::vector<float> this_threads;
  std::vector<float>& buf = this_threads;  // the workers see the calling thread's buffer through this
  buf.resize(static_cast<std::size_t>(spans * (qd + h.n_head) + h.n_head));
  auto out_of = [&](std::int64_t i) { return buf.data() + i * qd; };
  auto lse_of = [&](std::int64_t i) { return buf.data() + spans * qd + i * h.n_head; };
  auto attend_spans = [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      const auto lo = std::max(first, static_cast<std::int32_t>((first_span + c) * span));
      const auto hi = std::min(pos, static_cast<std::int32_t>((first_span + c + 1) * span - 1));
      read_pages(view, lo, hi);
      const kernels::attention_row row{q, out_of(c), lo, hi, lse_of(c)};
      kernels::attention(shape, view, &row, 1, 0, h.n_head);
    }
  };
  if (spans == 1 || pool.size() == 1) {
    attend_spans(0, spans);
  } else {
    // One span per task, handed out in order as workers free up: the last span (the newest
    // positions) is mostly short, so with 2 workers and 3 spans a contiguous split gave one worker
    // two full spans and the other the short one, which then waited.
    auto one_span = [&](int c, int) { attend_spans(c, c + 1); };
    pool.parallel_for(static_cast<int>(spans), std::ref(one_span));
  }
  float* lse = lse_of(spans);
  std::fill(attn, attn + qd, 0.0f);
  std::fill(lse, lse + h.n_head, -INFINITY);
  for (std::int64_t c = 0; c < spans; ++c) kernels::fold_attention(attn, lse, out_of(c), lse_of(c), h.n_head, h.head_dim);
  if (lse_out) std::copy(lse, lse + h.n_head, lse_out);
  return true;
}

/// Attention of every row over its sequence. The work units are (block of consecutive rows of one
/// sequence, run of query heads that share a kv head): a block holds as many rows as one kernel pass
/// takes with those heads, so the rows of a prefill chunk share each tile of keys and values.
/// Workers take units as they free up, the longest contexts (last rows) first. lse, when set,
/// gets each row's log-sum-exp per head (n_head per row).
void attend_rows(const hparams& h, int il, const batch_view& batch, const float* q, float* attn, float* lse, const layer_kv& kv,
                 kernels::compute_pool& pool) {
  const kernels::attention_shape shape{h.n_head, h.n_head_kv, h.head_dim, h.attn_scale, h.attn_softcap};
  const std::int64_t qd = h.q_dim();
  const int group = h.n_head / h.n_head_kv;
  const std::int64_t n = batch.n_rows;
  // Enough units for every worker even for one decode row: split a group when needed.
  const std::int64_t per_row_wanted = (pool.size() + n - 1) / n;
  const int splits = static_cast<int>(std::clamp<std::int64_t>((per_row_wanted + h.n_head_kv - 1) / h.n_head_kv, 1, group));
  const int heads_per_unit = (group + splits - 1) / splits;
  const int units_per_group = (group + heads_per_unit - 1) / heads_per_unit;
  const std::int64_t units_per_block = static_cast<std::int64_t>(h.n_head_kv) * units_per_group;
  const std::int32_t block_rows = std::max(1, kernels::k_attention_queries / heads_per_unit);
  std::int64_t blocks = 0;
  for (const seq_rows& sq : batch.seqs) blocks += (sq.n_rows + block_rows - 1) / block_rows;
  const std::int64_t units = blocks * units_per_block;

  auto run_unit = [&](std::int64_t u) {
    std::int64_t block = u / units_per_block;
    const int in_block = static_cast<int>(u % units_per_block);
    const int kvh = in_block / units_per_group;
    const int h0 = kvh * group + (in_block % units_per_group) * heads_per_unit;
    const int h1 = std::min(h0 + heads_per_unit, (kvh + 1) * group);
    // The sequence and rows of this block.
    const seq_rows* sq = batch.seqs.data();
    for (std::int64_t nb; block >= (nb = (sq->n_rows + block_rows - 1) / block_rows); ++sq) block -= nb;
    const std::int32_t r0 = static_cast<std::int32_t>(block) * block_rows;
    const std::int32_t nr = std::min(block_rows, sq->n_rows - r0);
    kernels::attention_row rows[kernels::k_attention_queries];
    for (std::int32_t r = 0; r < nr; ++r) {
      const std::int64_t row = sq->first_row + r0 + r;
      const std::int32_t pos = sq->start_pos + r0 + r;
      rows[r] = {q + row * qd, attn + row * qd, first_attended(h, il, pos), pos, lse ? lse + row * h.n_head : nullptr};
    }
    const kernels::kv_page_view view = page_view(h, kv, sq->blocks);
    kernels::attention(shape, view, rows, nr, h0, h1);
  };

  std::int64_t work = 0;  // key positions times query heads, to skip the pool for tiny steps
  for (const seq_rows& sq : batch.seqs) work += static_cast<std::int64_t>(sq.n_rows) * (sq.start_pos + sq.n_rows);
  work *= h.n_head * h.head_dim;
  if (attend_one_row_split(h, shape, il, batch, q, attn, lse, kv, pool)) return;
  if (work < (1 << 16) || pool.size() == 1 || units > (1 << 30)) {
    for (std::int64_t u = 0; u < units; ++u) run_unit(u);
  } else {
    pool.parallel_for(static_cast<int>(units), [&](int task, int n_tasks) { run_unit(n_tasks - 1 - task); });
  }
}

/// The attention block of layer il: the projections of cur (the normed input), attention over
/// the KV pages (writing the batch's own KV first), the output gate of gated attention, and the
/// output projection into out.
void attention_block(const layer_weights& w, const hparams& h, int il, const batch_view& batch, const float* cur, float* out,
                     layer_kv& kv, scratch& s, kernels::compute_pool& pool) {
  const std::int64_t n = batch.n_rows, qd = h.q_dim(), kvd = h.kv_dim();
  float* q = fa::q(s);
  float* k = fa::k(s);
  float* v = fa::v(s);
  float* attn = fa::attn(s);
  float* gate = fa::gate(s);
  if (w.wqkv) {
    matmul(pool, w.wqkv, cur, n, gate);  // each row: q, k, v
    for (std::int64_t i = 0; i < n; ++i) {
      const float* r = gate + i * (qd + 2 * kvd);
      std::copy(r, r + qd, q + i * qd);
      std::copy(r + qd, r + qd + kvd, k + i * kvd);
      std::copy(r + qd + kvd, r + qd + 2 * kvd, v + i * kvd);
    }
  } else if (h.attn_gated) {
    matmul_many(pool, {{&w.wq, gate}, {&w.wk, k}, {&w.wv, v}}, cur, n);  // each head: its query, then its gate
    split_query_gate(gate, q, n, h);
  } else {
    matmul_many(pool, {{&w.wq, q}, {&w.wk, k}, {&w.wv, v}}, cur, n);
  }
  float smooth[kernels::k_attention_max_head_dim];
  const float* q4_smooth = q4_key_smoothing(w, h, smooth) ? smooth : nullptr;
  for_rows(pool, n, qd + 2 * kvd, [&](std::int64_t b, std::int64_t e) { prepare_rows(w, h, il, batch, q, k, v, kv, b, e, q4_smooth); });
  thread_local std::vector<float> lse;  // with sinks: each row's log-sum-exp per head
  if (w.attn_sinks) lse.resize(static_cast<std::size_t>(n * h.n_head));
  attend_rows(h, il, batch, q, attn, w.attn_sinks ? lse.data() : nullptr, kv, pool);
  if (kv.rotate_q4())
    for (const seq_rows& sq : batch.seqs)
      if (kv.format_of(sq.blocks[0]) == kv::kv_format::q4_0) finish_q4_rows(h, attn + sq.first_row * qd, sq.n_rows);
  if (w.attn_sinks) apply_attention_sinks(w.attn_sinks, h, lse.data(), attn, 0, n);
  if (h.attn_gated) apply_output_gate(attn, gate, n * qd);
  matmul(pool, w.wo, attn, n, out);
  if (w.bo)
    for (std::int64_t i = 0; i < n; ++i) kernels::add(out + i * h.n_embd, out + i * h.n_embd, w.bo.f32(), h.n_embd);
}

/// The dense feed-forward block: out = down(act(gate(cur)) * up(cur)).
void dense_ffn(const layer_weights& w, const hparams& h, std::int64_t n, const float* cur, float* out, scratch& s,
               kernels::compute_pool& pool) {
  const std::int64_t ff = h.n_ff;
  float* gate = fa::gate(s);
  float* up = fa::up(s);
  if (w.gate_up) {
    matmul(pool, w.gate_up, cur, n, gate);  // each row: gate (ff) then up (ff)
    // Compact in place: row i's gate moves down to i * ff; it never overtakes an unread row.
    for (std::int64_t i = 0; i < n; ++i) {
      std::copy(gate + i * 2 * ff + ff, gate + i * 2 * ff + 2 * ff, up + i * ff);
      std::copy(gate + i * 2 * ff, gate + i * 2 * ff + ff, gate + i * ff);
    }
  } else {
    matmul_many(pool, {{&w.gate, gate}, {&w.up, up}}, cur, n);
  }
  for_rows(pool, n, ff, [&](std::int64_t b, std::int64_t e) {
    float* g = gate + b * ff;
    if (h.architecture == arch::gemma2 || h.architecture == arch::gemma3) kernels::gelu(g, (e - b) * ff);
    else kernels::silu(g, (e - b) * ff);
    kernels::mul(g, g, up + b * ff, (e - b) * ff);
  });
  matmul(pool, w.down, gate, n, out);
}

void layer_slice(const layer_weights& w, const hparams& h, int il, const batch_view& batch, float* hidden, layer_kv& kv,
                 scratch& s, kernels::compute_pool& pool, recurrent_state* state) {
  const std::int64_t n = batch.n_rows, d = h.n_embd;
  float* cur = fa::cur(s);
  float* out = fa::out(s);

  // Attention block (or the recurrent layer's mixer in its place).
  for_rows(pool, n, d, [&](std::int64_t b, std::int64_t e) { rms_norm_rows(hidden, w.attn_norm, cur, b, e, d, h.norm_eps); });
  if (h.recurrent(il)) {
    if (!state) throw std::invalid_argument("layer_forward: a recurrent layer needs a recurrent_state");
    if (h.mamba2()) mamba2_mixer(w, h, il, batch, cur, out, *state, pool);
    else recurrent_mixer(w, h, il, batch, cur, out, *state, pool);
  } else {
    attention_block(w, h, il, batch, cur, out, kv, s, pool);
  }
  // The residual, and the feed-forward block's norm.
  for_rows(pool, n, d, [&](std::int64_t b, std::int64_t e) {
    if (w.post_attn_norm) rms_norm_rows(out, w.post_attn_norm, out, b, e, d, h.norm_eps);
    if (h.residual_scale != 1.0f) kernels::scale(out + b * d, (e - b) * d, h.residual_scale);
    kernels::add(hidden + b * d, hidden + b * d, out + b * d, (e - b) * d);
    rms_norm_rows(hidden, w.ffn_norm, cur, b, e, d, h.norm_eps);
  });

  // Feed-forward block.
  if (h.moe()) moe_ffn(w, h, cur, n, out, pool);
  else dense_ffn(w, h, n, cur, out, s, pool);
  for_rows(pool, n, d, [&](std::int64_t b, std::int64_t e) {
    if (w.post_ffn_norm) rms_norm_rows(out, w.post_ffn_norm, out, b, e, d, h.norm_eps);
    if (h.residual_scale != 1.0f) kernels::scale(out + b * d, (e - b) * d, h.residual_scale);
    kernels::add(hidden + b * d, hidden + b * d, out + b * d, (e - b) * d);
  });
}

/// A per-thread scratch for the model-based overloads, replaced when too small or of other dims.
scratch& thread_scratch(const hparams& h, std::int32_t rows) {
  thread_local std::unique_ptr<scratch> s;
  if (!s || !s->fits(h) || s->max_rows() < rows) s = std::make_unique<scratch>(h, std::max(rows, s && s->fits(h) ? s->max_rows() : 1));
  return *s;
}

}  // namespace

void embed(const model_weights& w, const hparams& h, const std::int32_t* tokens, std::int32_t n, float* hidden) {
  const tensor_view& e = w.token_embd;
  const std::size_t stride = kernels::row_bytes(e.type, e.cols);
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t t = std::clamp<std::int32_t>(tokens[i], 0, h.n_vocab - 1);
    float* row = hidden + static_cast<std::size_t>(i) * static_cast<std::size_t>(e.cols);
    if (e.packed) {
      kernels::dequantize_x16_row(e.type, e.packed, e.rows, t, e.cols, row);
    } else {
      kernels::dequantize_row(e.type, static_cast<const std::byte*>(e.data) + static_cast<std::size_t>(t) * stride, row, e.cols);
    }
    if (h.embed_scale != 1.0f) kernels::scale(row, e.cols, h.embed_scale);
  }
}

void layer_forward(const layer_weights& w, const hparams& h, int il, const batch_view& batch, float* hidden,
                   layer_kv& kv, scratch& s, kernels::compute_pool& pool, recurrent_state* state) {
  if (batch.n_rows <= s.max_rows()) {
    layer_slice(w, h, il, batch, hidden, kv, s, pool, state);
    return;
  }
  // Slices of at most max_rows rows, in row order: a sequence cut in two writes its first part's
  // KV before its second part attends to it.
  std::vector<seq_rows>& part = fa::slice(s);
  for (std::int32_t r0 = 0; r0 < batch.n_rows; r0 += s.max_rows()) {
    const std::int32_t r1 = std::min(batch.n_rows, r0 + s.max_rows());
    slice_rows(batch, r0, r1, part);
    batch_view sub{batch.tokens ? batch.tokens + r0 : nullptr, r1 - r0, part};
    layer_slice(w, h, il, sub, hidden + static_cast<std::int64_t>(r0) * h.n_embd, kv, s, pool, state);
  }
}

void slice_rows(const batch_view& batch, std::int32_t r0, std::int32_t r1, std::vector<seq_rows>& part) {
  part.clear();
  for (const seq_rows& sq : batch.seqs) {
    const std::int32_t b = std::max(r0, sq.first_row), e = std::min(r1, sq.first_row + sq.n_rows);
    if (b < e) part.push_back({sq.blocks, sq.n_blocks, b - r0, e - b, sq.start_pos + (b - sq.first_row), sq.state_slot});
  }
}

void output_logits(const model_weights& w, const hparams& h, const float* hidden, std::span<const std::int32_t> rows,
                   float* logits, scratch& s, kernels::compute_pool& pool) {
  const std::int64_t d = h.n_embd;
  float* cur = fa::cur(s);
  for (std::size_t r0 = 0; r0 < rows.size(); r0 += static_cast<std::size_t>(s.max_rows())) {
    const std::size_t n = std::min(rows.size() - r0, static_cast<std::size_t>(s.max_rows()));
    for (std::size_t i = 0; i < n; ++i)
      kernels::rms_norm(hidden + static_cast<std::int64_t>(rows[r0 + i]) * d, w.output_norm.f32(),
                        cur + static_cast<std::int64_t>(i) * d, d, h.norm_eps);
    float* out = logits + static_cast<std::int64_t>(r0) * h.n_vocab;
    matmul(pool, w.output, cur, static_cast<std::int64_t>(n), out);
    if (h.logit_scale != 1.0f) kernels::scale(out, static_cast<std::int64_t>(n) * h.n_vocab, 1.0f / h.logit_scale);
    if (h.final_softcap > 0) kernels::soft_cap(out, static_cast<std::int64_t>(n) * h.n_vocab, h.final_softcap);
  }
}

void embed(const model& m, const std::int32_t* tokens, std::int32_t n, float* hidden) {
  embed(m.weights, m.hp, tokens, n, hidden);
}

void layer_forward(const model& m, int il, const batch_view& batch, float* hidden, layer_kv& kv,
                   kernels::compute_pool& pool, recurrent_state* state) {
  layer_forward(m.weights.layers[static_cast<std::size_t>(il)], m.hp, il, batch, hidden, kv,
                thread_scratch(m.hp, batch.n_rows), pool, state);
}

void output_logits(const model& m, const float* hidden, std::span<const std::int32_t> rows, float* logits,
                   kernels::compute_pool& pool) {
  output_logits(m.weights, m.hp, hidden, rows, logits, thread_scratch(m.hp, static_cast<std::int32_t>(rows.size())), pool);
}

}  // namespace strata::model
