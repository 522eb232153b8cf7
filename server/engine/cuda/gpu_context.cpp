#include "server/engine/cuda/gpu_context.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/kv/kv_format.hpp"

namespace strata::engine::gpu {

namespace {
/// Whether a switch of the environment is on: unless it is "0".
bool env_on(const char* name) {
  const char* e = std::getenv(name);
  return e == nullptr || std::strcmp(e, "0") != 0;
}
}  // namespace

bool prefill_attention_enabled() {
  static const bool on = env_on("STRATA_CUDA_PREFILL_ATTENTION");
  return on;
}

bool staged_transfers() {
  static const bool on = env_on("STRATA_CUDA_STAGED_TRANSFERS");
  return on;
}

void ensure(cu::device_buffer& b, std::size_t bytes) {
  if (b.bytes() >= bytes) return;
  b = cu::device_buffer();  // free first: the device may not hold both
  b = cu::device_buffer(std::max<std::size_t>(bytes, 256));
}

gpu_context::gpu_context(const model::hparams& h, std::int32_t page_tokens) : hp_(h), page_tokens_(page_tokens) {
  int count = 0;
  cu::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw cu::cuda_error("no CUDA device");
  cu::check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp p{};
  cu::check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
  name_ = p.name;
  cu::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

gpu_context::~gpu_context() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

scratch& gpu_context::reserve(std::int32_t n) {
  if (n <= s_.rows) return s_;
  const auto rows = static_cast<std::size_t>(std::max(n, 8));
  const auto d = static_cast<std::size_t>(hp_.n_embd), qd = static_cast<std::size_t>(hp_.q_dim()),
             kvd = static_cast<std::size_t>(hp_.kv_dim()), ff = static_cast<std::size_t>(hp_.n_ff);
  cudaStreamSynchronize(stream_);
  ensure(s_.cur, rows * d * 4);
  ensure(s_.out, rows * d * 4);
  ensure(s_.q, rows * qd * 4);
  ensure(s_.attn, rows * qd * 4);
  ensure(s_.k, rows * kvd * 4);
  ensure(s_.v, rows * kvd * 4);
  ensure(s_.gate, rows * ff * 4);
  ensure(s_.up, rows * ff * 4);
  ensure(s_.x16, rows * std::max({d, qd, ff}) * 2);
  if (s_.rows == 0) {
    s_.xq_embd = cu::make_act_q8(hp_.n_embd, cu::k_matvec_max_batch);
    s_.xq_q = cu::make_act_q8(hp_.q_dim(), cu::k_matvec_max_batch);
    s_.xq_ff = cu::make_act_q8(hp_.n_ff, cu::k_matvec_max_batch);
  }
  s_.rows = static_cast<std::int32_t>(rows);
  return s_;
}

gpu_context::row_split gpu_context::split_rows(const pipeline::batch_layout& layout, const std::vector<std::int32_t>& pos) const {
  row_split out;
  const int per_tile = cu::prefill_tile_rows(hp_.n_head, hp_.n_head_kv, hp_.head_dim);
  if (per_tile == 0 || !prefill_attention_enabled()) return out;
  for (const auto& s : layout.seqs) {
    if (s.n_rows >= cu::k_prefill_attention_min_rows) {
      for (std::int32_t r = 0; r < s.n_rows; r += per_tile) out.tiles.push_back({s.first_row + r, std::min(per_tile, s.n_rows - r)});
      continue;
    }
    for (std::int32_t r = 0; r < s.n_rows; ++r) {
      out.decode.push_back(s.first_row + r);
      out.decode_positions = std::max(out.decode_positions, pos[static_cast<std::size_t>(s.first_row + r)] + 1);
    }
  }
  // The tiles whose last row reaches furthest take longest: they go first.
  auto reach = [&](const cu::prefill_tile& t) { return pos[static_cast<std::size_t>(t.row0 + t.n_rows - 1)]; };
  std::stable_sort(out.tiles.begin(), out.tiles.end(), [&](const auto& a, const auto& b) { return reach(a) > reach(b); });
  return out;
}

step_state& gpu_context::step(const pipeline::batch_layout& layout, const std::vector<float>& hidden) {
  if (auto it = live_.find(layout.step); it != live_.end()) return *it->second;
  std::unique_ptr<step_state> st;
  if (!spare_.empty()) {
    st = std::move(spare_.back());
    spare_.pop_back();
  } else {
    st = std::make_unique<step_state>();
  }
  const std::int32_t n = layout.n_rows();
  st->step = layout.step;
  st->n_rows = n;
  std::vector<std::int32_t> pos(static_cast<std::size_t>(n)), slots(pos.size()), first(pos.size(), 0);
  std::size_t stride = 0;
  for (const auto& s : layout.seqs) stride = std::max(stride, s.blocks.size());
  // One table for all rows when they are one sequence's (a prefill); else one per row.
  const bool one_table = layout.seqs.size() == 1;
  std::vector<std::int32_t> tables(one_table ? stride : pos.size() * stride, 0);
  std::int32_t max_pos = 0;
  for (const auto& s : layout.seqs) {
    if (one_table) std::copy(s.blocks.begin(), s.blocks.end(), tables.begin());
    for (std::int32_t r = 0; r < s.n_rows; ++r) {
      const auto row = static_cast<std::size_t>(s.first_row + r);
      const std::int32_t p = s.start_pos + r;
      pos[row] = p;
      slots[row] = s.blocks[static_cast<std::size_t>(p / page_tokens_)] * page_tokens_ + p % page_tokens_;
      max_pos = std::max(max_pos, p + 1);
      if (!one_table) std::copy(s.blocks.begin(), s.blocks.end(), tables.begin() + static_cast<std::ptrdiff_t>(row * stride));
    }
  }
  st->blocks_stride = one_table ? 0 : static_cast<std::int32_t>(stride);
  const auto split = split_rows(layout, pos);
  st->max_positions = split.tiles.empty() ? max_pos : split.decode_positions;
  st->n_tiles = static_cast<std::int32_t>(split.tiles.size());
  st->n_decode = split.tiles.empty() ? n : static_cast<std::int32_t>(split.decode.size());
  if (!split.tiles.empty()) {
    ensure(st->tiles, split.tiles.size() * sizeof(cu::prefill_tile));
    st->tiles.upload(split.tiles.data(), split.tiles.size() * sizeof(cu::prefill_tile), stream_);
    ensure(st->decode_rows, std::max<std::size_t>(split.decode.size(), 1) * 4);
    if (!split.decode.empty()) st->decode_rows.upload(split.decode.data(), split.decode.size() * 4, stream_);
  }
  const std::size_t rows_bytes = pos.size() * 4;
  ensure(st->hidden, hidden.size() * 4);
  ensure(st->pos, rows_bytes);
  ensure(st->slots, rows_bytes);
  ensure(st->first, rows_bytes);
  ensure(st->last, rows_bytes);
  ensure(st->blocks, std::max<std::size_t>(tables.size(), 1) * 4);
  st->hidden.upload(hidden.data(), hidden.size() * 4, stream_);
  st->pos.upload(pos.data(), rows_bytes, stream_);
  st->slots.upload(slots.data(), rows_bytes, stream_);
  st->first.upload(first.data(), rows_bytes, stream_);
  st->last.upload(pos.data(), rows_bytes, stream_);
  if (!tables.empty()) st->blocks.upload(tables.data(), tables.size() * 4, stream_);
  // The host vectors go when this returns: wait for the copies (the step's first stage only).
  cu::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return *live_.emplace(layout.step, std::move(st)).first->second;
}

void gpu_context::finish_step(const pipeline::batch_layout& layout, std::vector<float>& hidden) {
  auto it = live_.find(layout.step);
  if (it == live_.end()) return;
  hidden.resize(static_cast<std::size_t>(it->second->n_rows) * static_cast<std::size_t>(hp_.n_embd));
  it->second->hidden.download(hidden.data(), hidden.size() * 4, stream_);
  spare_.push_back(std::move(it->second));
  live_.erase(it);
}

}  // namespace strata::engine::gpu
