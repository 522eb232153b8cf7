#include "server/engine/cuda/gpu_stages.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <stdexcept>

#include "kernels/cuda/fused.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/kv_store.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/cuda/prefill_attention.hpp"
#include "src/common/block_buffers.hpp"
#include "src/model/forward.hpp"

namespace strata::engine::gpu {
namespace {

using model::tensor_view;

cu::device_matrix upload(const tensor_view& t, cudaStream_t s) { return cu::upload_matrix(t.type, t.data, t.rows, t.cols, s); }

/// A norm's or bias's f32 values on the device (empty for an absent tensor).
cu::device_buffer upload_f32(const tensor_view& t, cudaStream_t s) {
  if (!t) return {};
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(t.rows, 1) * t.cols) * 4;
  cu::device_buffer b(n);
  b.upload(t.data, n, s);
  cu::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return b;
}

cu::device_buffer upload_floats(const std::vector<float>& v, cudaStream_t s) {
  cu::device_buffer b(v.size() * 4);
  b.upload(v.data(), v.size() * 4, s);
  cu::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return b;
}

/// Why matrix t cannot be multiplied on the GPU, or empty.
std::string matrix_problem(const char* name, const tensor_view& t) {
  if (!t) return std::string(name) + " is missing";
  if (!cu::matvec_supports(t.type))
    return std::string(name) + " is " + kernels::dtype_name(t.type) + " (the GPU takes f16, bf16, q8_0, q4_0, q4_1, q4_K, q5_K, q6_K)";
  if (t.cols % cu::matvec_k_multiple(t.type) != 0 || t.cols % 32 != 0)
    return std::string(name) + " has rows of " + std::to_string(t.cols) + " values, not a multiple of " +
           std::to_string(std::max<std::int64_t>(32, cu::matvec_k_multiple(t.type))) + " for " + kernels::dtype_name(t.type);
  return {};
}

/// The inputs of a matrix product of n rows of x (dim values each, device f32): quantized for the
/// matvecs (n <= k_matvec_max_batch), or f16 for the GEMM.
void prepare_input(const float* x, std::int32_t n, std::int64_t dim, cu::act_q8& xq, cu::device_buffer& x16, cudaStream_t s) {
  if (n <= cu::k_matvec_max_batch) cu::quantize_act(x, n, xq, s);
  else cu::to_f16(x, x16.data(), n * dim, s);
}

/// RMSNorm of n rows of h into cur, with the inputs of the next products made from it.
void norm_input(const float* h, const cu::device_buffer& w, float* cur, std::int32_t n, std::int32_t dim, float eps,
                cu::act_q8& xq, cu::device_buffer& x16, cudaStream_t s) {
  if (n <= cu::k_matvec_max_batch) {
    cu::rms_norm_quantize(h, w.as<float>(), cur, n, dim, eps, xq, s);
  } else {
    cu::rms_norm(h, w.as<float>(), cur, n, dim, eps, s);
    cu::to_f16(cur, x16.data(), static_cast<std::int64_t>(n) * dim, s);
  }
}

/// y_i = W_i x for each pair: for decode rows, one matvec_many launch per run of neighbours that
/// share their type and k (q and k in q4_K with v in q6_K: two launches), else a GEMM each (which
/// may split k in `work`, when it is large enough).
void project(std::initializer_list<std::pair<const cu::device_matrix*, float*>> ws, const float* x, const cu::act_q8& xq,
             const cu::device_buffer& x16, std::int32_t n, cudaStream_t s, const cu::device_buffer* work = nullptr) {
  if (n > cu::k_matvec_max_batch) {
    for (const auto& [w, y] : ws) cu::gemm(*w, x16.data(), n, y, s, work ? work->data() : nullptr, work ? work->bytes() : 0);
    return;
  }
  std::array<cu::matvec_out, cu::k_matvec_max_outputs> outs;
  int count = 0;
  for (const auto& [w, y] : ws) {
    if (count > 0 && (count == cu::k_matvec_max_outputs || w->type != outs[0].w->type || w->k != outs[0].w->k)) {
      cu::matvec_many(outs.data(), count, x, &xq, n, s);
      count = 0;
    }
    outs[static_cast<std::size_t>(count++)] = {w, y, false};
  }
  cu::matvec_many(outs.data(), count, x, &xq, n, s);
}

}  // namespace

std::string unsupported(const model::model& m) {
  const auto& h = m.hp;
  using model::arch;
  if (h.architecture != arch::llama && h.architecture != arch::qwen2 && h.architecture != arch::qwen3)
    return std::string("the GPU path runs llama, qwen2 and qwen3 models, not ") + model::arch_name(h.architecture);
  if (h.moe() || h.has_recurrent() || h.attn_gated) return "the GPU path runs dense attention layers only";
  if (h.sliding_window > 0 || h.yarn.ext_factor != 0 || h.final_softcap > 0)
    return "the GPU path has no sliding windows, YaRN or final soft-cap";
  if (h.head_dim != 32 && h.head_dim != 64 && h.head_dim != 128 && h.head_dim != 256)
    return "the GPU's attention takes heads of 32, 64, 128 or 256 values";
  if (h.n_rot % 2 != 0 || h.n_rot > h.head_dim) return "the GPU's RoPE needs an even n_rot of at most the head size";
  for (int il = 0; il < h.n_layer; ++il) {
    const auto& w = m.weights.layers[static_cast<std::size_t>(il)];
    if (w.wqkv || w.gate_up || w.post_attn_norm || w.post_ffn_norm || w.bo || w.attn_sinks)
      return "layer " + std::to_string(il) + " has tensors the GPU path does not run (fused qkv or gate_up, post norms, sinks)";
    const std::pair<const char*, const tensor_view*> mats[] = {{"attn_q", &w.wq}, {"attn_k", &w.wk}, {"attn_v", &w.wv},
                                                                {"attn_output", &w.wo}, {"ffn_gate", &w.gate}, {"ffn_up", &w.up},
                                                                {"ffn_down", &w.down}};
    for (const auto& [name, t] : mats)
      if (auto p = matrix_problem(name, *t); !p.empty()) return "layer " + std::to_string(il) + ": " + p;
  }
  if (auto p = matrix_problem("output", m.weights.output); !p.empty()) return p;
  return {};
}

gpu_layer_stage::gpu_layer_stage(std::shared_ptr<const model::model> m, int layer, const kv::block_space& pages,
                                 std::shared_ptr<gpu_context> ctx)
    : m_(std::move(m)), layer_(layer), last_(layer == m_->hp.n_layer - 1), ctx_(std::move(ctx)) {
  const auto& h = m_->hp;
  const auto& w = m_->weights.layers[static_cast<std::size_t>(layer)];
  cudaStream_t s = ctx_->stream();
  wq_ = upload(w.wq, s);
  wk_ = upload(w.wk, s);
  wv_ = upload(w.wv, s);
  wo_ = upload(w.wo, s);
  gate_ = upload(w.gate, s);
  up_ = upload(w.up, s);
  down_ = upload(w.down, s);
  attn_norm_ = upload_f32(w.attn_norm, s);
  ffn_norm_ = upload_f32(w.ffn_norm, s);
  bq_ = upload_f32(w.bq, s);
  bk_ = upload_f32(w.bk, s);
  bv_ = upload_f32(w.bv, s);
  q_norm_ = upload_f32(w.q_norm, s);
  k_norm_ = upload_f32(w.k_norm, s);
  rope_factors_ = upload_f32(w.rope_freqs, s);
  inv_freq_ = upload_floats(cu::rope_inv_freq(h.n_rot, h.rope_base(layer)), s);
  space_ = pages;
  ctx_->set_block_space(pages);
  n_pages_ = pages.count(kv::kv_format::f16);
  n_pages_q8_ = pages.count(kv::kv_format::q8_0);
  if (n_pages_q8_ > 0 && h.head_dim % 32 != 0) throw std::invalid_argument("q8_0 KV pages need heads of a multiple of 32 values");
  const std::size_t n = page_bytes(false) * static_cast<std::size_t>(n_pages_), n8 = page_bytes(true) * static_cast<std::size_t>(n_pages_q8_);
  k_ = cu::device_buffer(n);
  v_ = cu::device_buffer(n);
  k8_ = cu::device_buffer(n8);
  v8_ = cu::device_buffer(n8);
}

std::size_t gpu_layer_stage::weight_bytes() const {
  return wq_.bytes() + wk_.bytes() + wv_.bytes() + wo_.bytes() + gate_.bytes() + up_.bytes() + down_.bytes();
}

std::size_t gpu_layer_stage::page_bytes(bool q8) const {
  return static_cast<std::size_t>(ctx_->page_tokens()) *
         static_cast<std::size_t>(kv::kv_row_bytes(q8 ? kv::kv_format::q8_0 : kv::kv_format::f16, m_->hp.kv_dim()));
}

gpu_layer_stage::place gpu_layer_stage::where(std::int32_t block) const {
  if (block < 0 || block >= space_.total()) return {};
  const kv::kv_format f = space_.format_of(block);
  if (f == kv::kv_format::q4_0) return {};
  return {f == kv::kv_format::q8_0, space_.index_in_format(block)};
}

void gpu_layer_stage::run(const pipeline::batch_layout& layout, std::vector<float>& hidden) {
  const auto& h = m_->hp;
  const std::int32_t n = layout.n_rows(), d = h.n_embd;
  if (n == 0) return;
  for (const auto& sq : layout.seqs)
    for (std::int32_t b : sq.blocks)
      if (!holds(b))
        throw std::invalid_argument("the GPU path keeps f16 and q8_0 KV pages: block " + std::to_string(b) + " is neither");
  if (hidden.empty()) {
    hidden.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(d));
    model::embed(*m_, layout.tokens.data(), n, hidden.data());
  }
  std::lock_guard lock(ctx_->mutex());
  cudaStream_t s = ctx_->stream();
  step_state& st = ctx_->step(layout, hidden);
  scratch& sc = ctx_->reserve(n);
  // One workspace for the attention's parts and the GEMMs' split sums (queued one after another).
  std::size_t work = 0;
  if (st.has_f16) work = cu::decode_attention_workspace(pages(false), attention_rows(st, sc, false));
  if (st.has_q8) work = std::max(work, cu::decode_attention_workspace(pages(true), attention_rows(st, sc, true)));
  if (n > cu::k_matvec_max_batch)
    for (const cu::device_matrix* w : {&wq_, &wk_, &wv_, &wo_, &gate_, &up_, &down_}) work = std::max(work, cu::gemm_workspace(*w, n));
  ensure(sc.workspace, work);
  // Decode rows run as a graph (step_graph.hpp); nothing below allocates or waits.
  if (n <= cu::k_matvec_max_batch && graphs_enabled())
    graph_.run(s, [&](cudaStream_t gs) { queue(st, sc, gs); });
  else
    queue(st, sc, s);
  pages_used_.record(s);
  if (last_) ctx_->finish_step(layout, hidden);
}

cu::kv_pages_f16 gpu_layer_stage::pages(bool q8) const {
  if (q8) return {k8_.data(), v8_.data(), ctx_->page_tokens(), m_->hp.n_head_kv, m_->hp.head_dim, 8};
  return {k_.data(), v_.data(), ctx_->page_tokens(), m_->hp.n_head_kv, m_->hp.head_dim, 16};
}

cu::decode_rows gpu_layer_stage::attention_rows(const step_state& st, scratch& sc, bool q8) const {
  const auto& h = m_->hp;
  cu::decode_rows rows;
  rows.q = sc.q.as<float>();
  rows.out = sc.attn.as<float>();
  rows.n_seq = st.n_rows;
  rows.n_head = h.n_head;
  rows.blocks = st.blocks.as<std::int32_t>();
  rows.blocks_stride = st.blocks_stride;
  rows.first = st.first.as<std::int32_t>();
  rows.last = st.last.as<std::int32_t>();
  rows.max_positions = st.max_positions;
  rows.scale = h.attn_scale;
  rows.softcap = h.attn_softcap;
  // The decode rows of this format: all rows of the step, or their list (the prefill rows go to
  // prefill_attention, the other format's rows to its own kernels).
  rows.n_seq = q8 ? st.n_decode_q8 : st.n_decode;
  rows.max_positions = q8 ? st.max_positions_q8 : st.max_positions;
  if (st.decode_subsets) rows.rows = (q8 ? st.decode_rows_q8 : st.decode_rows).as<std::int32_t>();
  return rows;
}

void gpu_layer_stage::queue(const step_state& st, scratch& sc, cudaStream_t s) {
  const auto& h = m_->hp;
  const std::int32_t n = st.n_rows, d = h.n_embd, qd = h.q_dim(), kvd = h.kv_dim(), ff = h.n_ff;
  float* x = st.hidden.as<float>();
  float* cur = sc.cur.as<float>();
  float* q = sc.q.as<float>();
  float* k = sc.k.as<float>();
  float* v = sc.v.as<float>();
  float* attn = sc.attn.as<float>();
  float* out = sc.out.as<float>();

  // Attention block: norm, q/k/v, biases, q/k norms, RoPE, the rows' K and V into their pages.
  norm_input(x, attn_norm_, cur, n, d, h.norm_eps, sc.xq_embd, sc.x16, s);
  // The rotation's angles, for the products' epilogue or rope_store_kv.
  cu::rope_args ra;
  ra.pos = st.pos.as<std::int32_t>();
  ra.inv_freq = inv_freq_.as<float>();
  ra.factors = rope_factors_.data() ? rope_factors_.as<float>() : nullptr;
  ra.freq_scale = h.rope_scale(layer_);
  ra.n_rot = h.n_rot;
  ra.neox = h.rope_neox;
  // One decode row without biases or q/k norms: RoPE and the page writes in the products'
  // epilogue (matvec_rope), rather than a launch of their own.
  const bool rope_in_matvec = n == 1 && !st.has_q8 && !h.rope_neox && !bq_.data() && !bk_.data() && !bv_.data() && !q_norm_.data() &&
                              cu::matvec_rope_supported(wq_.type, n) && cu::matvec_rope_supported(wk_.type, n) &&
                              cu::matvec_rope_supported(wv_.type, n);
  if (rope_in_matvec) {
    cu::matvec_rope rp;
    rp.angles = ra;
    rp.head_dim = h.head_dim;
    rp.slots = st.slots.as<std::int32_t>();
    rp.k_pages = k_.data();
    rp.v_pages = v_.data();
    rp.kv_dim = kvd;
    // q, k and v in runs of one type, as project() groups them.
    const std::array<std::pair<const cu::device_matrix*, float*>, 3> ws{{{&wq_, q}, {&wk_, k}, {&wv_, v}}};
    std::array<cu::matvec_out, 3> outs;
    int count = 0;
    cu::matvec_rope run = rp;
    for (std::size_t i = 0; i <= ws.size(); ++i) {
      if (count > 0 && (i == ws.size() || ws[i].first->type != outs[0].w->type || ws[i].first->k != outs[0].w->k)) {
        cu::matvec_many_rope(outs.data(), count, &sc.xq_embd, run, s);
        count = 0;
        run = rp;
      }
      if (i == ws.size()) break;
      if (i < 2) run.rotate |= 1u << count;
      if (i == 1) run.to_k = count;
      if (i == 2) run.to_v = count;
      outs[static_cast<std::size_t>(count++)] = {ws[i].first, ws[i].second, false};
    }
  } else {
    project({{&wq_, q}, {&wk_, k}, {&wv_, v}}, cur, sc.xq_embd, sc.x16, n, s, &sc.workspace);
  }
  if (bq_.data()) cu::add_bias(q, bq_.as<float>(), n, qd, s);
  if (bk_.data()) cu::add_bias(k, bk_.as<float>(), n, kvd, s);
  if (bv_.data()) cu::add_bias(v, bv_.as<float>(), n, kvd, s);
  if (q_norm_.data()) {
    cu::rms_norm(q, q_norm_.as<float>(), q, n * h.n_head, h.head_dim, h.norm_eps, s);
    cu::rms_norm(k, k_norm_.as<float>(), k, n * h.n_head_kv, h.head_dim, h.norm_eps, s);
  }
  cu::rope_kv_args rk;
  rk.q = q;
  rk.k = k;
  rk.v = v;
  rk.n = n;
  rk.n_head = h.n_head;
  rk.n_head_kv = h.n_head_kv;
  rk.head_dim = h.head_dim;
  rk.slots = st.slots.as<std::int32_t>();
  rk.k_pages = k_.data();
  rk.v_pages = v_.data();
  if (st.has_q8) {
    rk.slots_q8 = st.slots_q8.as<std::int32_t>();
    rk.k_pages_q8 = k8_.data();
    rk.v_pages_q8 = v8_.data();
  }
  if (!rope_in_matvec) cu::rope_store_kv(rk, ra, s);

  // A prefill's rows in tiles on the tensor cores, the other rows each over its sequence's pages.
  // Decode rows only: the attention also rounds its output for the output projection's matvec.
  // q8_0 rows (dequantized in registers) after the f16 rows, each kernel over its own rows.
  const bool rounded = n <= cu::k_matvec_max_batch && st.n_tiles == 0 && st.n_tiles_q8 == 0;
  for (const bool q8 : {false, true}) {
    if (!(q8 ? st.has_q8 : st.has_f16)) continue;
    cu::decode_rows rows = attention_rows(st, sc, q8);
    if (rounded) {
      rows.out_q = sc.xq_q.q.as<std::int8_t>();
      rows.out_ds = sc.xq_q.ds.as<float2>();
    }
    cu::prefill_attention(pages(q8), rows, (q8 ? st.tiles_q8 : st.tiles).as<cu::prefill_tile>(), q8 ? st.n_tiles_q8 : st.n_tiles, s);
    cu::decode_attention(pages(q8), rows, sc.workspace.data(), sc.workspace.bytes(), s);
  }

  if (!rounded) prepare_input(attn, n, qd, sc.xq_q, sc.x16, s);
  project({{&wo_, out}}, attn, sc.xq_q, sc.x16, n, s, &sc.workspace);

  // Feed-forward block; decode rows take the residual add with the norm, and SwiGLU with the
  // rounding of its output, in one launch each.
  float* g = sc.gate.as<float>();
  float* u = sc.up.as<float>();
  const bool decode = n <= cu::k_matvec_max_batch;
  if (decode) {
    cu::add_rms_norm_quantize(x, out, ffn_norm_.as<float>(), cur, n, d, h.norm_eps, sc.xq_embd, s);
  } else {
    cu::add(x, out, x, static_cast<std::int64_t>(n) * d, s);
    norm_input(x, ffn_norm_, cur, n, d, h.norm_eps, sc.xq_embd, sc.x16, s);
  }
  project({{&gate_, g}, {&up_, u}}, cur, sc.xq_embd, sc.x16, n, s, &sc.workspace);
  if (decode) {
    cu::swiglu_quantize(g, u, n, ff, sc.xq_ff, s);
  } else {
    cu::swiglu(g, u, g, static_cast<std::int64_t>(n) * ff, s);
    prepare_input(g, n, ff, sc.xq_ff, sc.x16, s);
  }
  if (decode) {  // x += W_down g in the matvec itself: one launch fewer
    const cu::matvec_out down{&down_, x, true};
    cu::matvec_many(&down, 1, g, &sc.xq_ff, n, s);
  } else {
    project({{&down_, out}}, g, sc.xq_ff, sc.x16, n, s, &sc.workspace);
    cu::add(x, out, x, static_cast<std::int64_t>(n) * d, s);
  }
}

void gpu_layer_stage::save_pages(std::vector<pipeline::frozen_block>& saved) {
  // Each format's blocks apart: their pages differ in size and pool.
  for (const bool q8 : {false, true}) {
    const std::size_t n = page_bytes(q8);
    const std::size_t total = n * 2 * static_cast<std::size_t>(m_->hp.n_layer), at = n * 2 * static_cast<std::size_t>(layer_);
    std::vector<std::byte*> host;
    std::vector<std::int32_t> pages;
    for (auto& f : saved) {
      const place p = where(f.block);
      if (p.page < 0 || p.q8 != q8) continue;
      if (layer_ == 0) f.bytes = block_buffers::shared().take(total);
      if (f.bytes.size() != total) continue;
      host.push_back(f.bytes.data() + at);
      pages.push_back(p.page);
    }
    if (pages.empty()) continue;
    cu::device_buffer& kb = q8 ? k8_ : k_;
    cu::device_buffer& vb = q8 ? v8_ : v_;
    if (!staged_transfers()) {  // the first version, for comparison: a synchronous copy per page
      std::lock_guard lock(ctx_->mutex());
      for (std::size_t i = 0; i < pages.size(); ++i) {
        kb.download(host[i], n, ctx_->stream(), static_cast<std::size_t>(pages[i]) * n);
        vb.download(host[i] + n, n, ctx_->stream(), static_cast<std::size_t>(pages[i]) * n);
      }
      continue;
    }
    ctx_->transfer().save({kb.data(), vb.data(), n}, host, pages, ctx_->stream(), ctx_->mutex(), pages_used_.get());
  }
}

void gpu_layer_stage::copy_pages(const std::vector<pipeline::block_copy>& copies) {
  std::lock_guard lock(ctx_->mutex());
  for (const auto& c : copies) {
    const place from = where(c.from), to = where(c.to);
    if (from.page < 0 || to.page < 0 || from.q8 != to.q8) continue;
    const std::size_t n = page_bytes(from.q8);
    const std::array<const cu::device_buffer*, 2> pools = from.q8 ? std::array<const cu::device_buffer*, 2>{&k8_, &v8_}
                                                                  : std::array<const cu::device_buffer*, 2>{&k_, &v_};
    for (const cu::device_buffer* b : pools) {
      auto* base = static_cast<char*>(b->data());
      cu::check(cudaMemcpyAsync(base + static_cast<std::size_t>(to.page) * n, base + static_cast<std::size_t>(from.page) * n, n,
                                cudaMemcpyDeviceToDevice, ctx_->stream()),
                "cudaMemcpyAsync (copy_pages)");
    }
  }
  pages_used_.record(ctx_->stream());
}

void gpu_layer_stage::load_pages(const std::vector<pipeline::frozen_block>& blocks) {
  for (const bool q8 : {false, true}) {
    const std::size_t n = page_bytes(q8);
    const std::size_t total = n * 2 * static_cast<std::size_t>(m_->hp.n_layer), at = n * 2 * static_cast<std::size_t>(layer_);
    std::vector<const std::byte*> host;
    std::vector<std::int32_t> pages;
    for (const auto& f : blocks) {
      const place p = where(f.block);
      if (p.page < 0 || p.q8 != q8 || f.bytes.size() != total) continue;  // checked by the scheduler
      host.push_back(f.bytes.data() + at);
      pages.push_back(p.page);
    }
    if (pages.empty()) continue;
    cu::device_buffer& kb = q8 ? k8_ : k_;
    cu::device_buffer& vb = q8 ? v8_ : v_;
    if (!staged_transfers()) {  // the first version, for comparison: a copy per page, then a wait
      std::lock_guard lock(ctx_->mutex());
      for (std::size_t i = 0; i < pages.size(); ++i) {
        kb.upload(host[i], n, ctx_->stream(), static_cast<std::size_t>(pages[i]) * n);
        vb.upload(host[i] + n, n, ctx_->stream(), static_cast<std::size_t>(pages[i]) * n);
      }
      cu::check(cudaStreamSynchronize(ctx_->stream()), "cudaStreamSynchronize");
      continue;
    }
    // Returns once the frozen blocks have been read (they may go then); the step's kernels wait
    // for the copies on the device.
    ctx_->transfer().load({kb.data(), vb.data(), n}, host, pages, ctx_->stream(), ctx_->mutex(), pages_used_.get());
  }
}

gpu_output_stage::gpu_output_stage(std::shared_ptr<const model::model> m, std::shared_ptr<gpu_context> ctx)
    : m_(std::move(m)), ctx_(std::move(ctx)) {
  w_ = upload(m_->weights.output, ctx_->stream());
  norm_ = upload_f32(m_->weights.output_norm, ctx_->stream());
  xq_ = cu::make_act_q8(m_->hp.n_embd, cu::k_matvec_max_batch);
}

void gpu_output_stage::logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) {
  const auto d = static_cast<std::size_t>(m_->hp.n_embd), nv = static_cast<std::size_t>(m_->hp.n_vocab);
  const auto n = static_cast<std::int32_t>(rows.size());
  out.resize(rows.size() * nv);
  if (n == 0) return;
  rows_.resize(rows.size() * d);
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::memcpy(rows_.data() + i * d, hidden.data() + static_cast<std::size_t>(rows[i]) * d, d * 4);
  std::lock_guard lock(ctx_->mutex());
  cudaStream_t s = ctx_->stream();
  ensure(x_, rows_.size() * 4);
  ensure(cur_, rows_.size() * 4);
  ensure(x16_, rows_.size() * 2);
  ensure(y_, out.size() * 4);
  x_.upload(rows_.data(), rows_.size() * 4, s);
  norm_input(x_.as<float>(), norm_, cur_.as<float>(), n, m_->hp.n_embd, m_->hp.norm_eps, xq_, x16_, s);
  project({{&w_, y_.as<float>()}}, cur_.as<float>(), xq_, x16_, n, s);
  y_.download(out.data(), out.size() * 4, s);
}

}  // namespace strata::engine::gpu
