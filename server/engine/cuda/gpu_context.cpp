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

namespace {
/// Whether a sequence's pages are q8_0 (its blocks are all of one format: the first says which).
bool in_q8(const kv::block_space& space, const pipeline::batch_sequence& s) {
  return !s.blocks.empty() && space.total() > 0 && space.format_of(s.blocks.front()) == kv::kv_format::q8_0;
}
}  // namespace

gpu_context::row_split gpu_context::split_rows(const pipeline::batch_layout& layout, const std::vector<std::int32_t>& pos) const {
  row_split out;
  const int per_tile = cu::prefill_tile_rows(hp_.n_head, hp_.n_head_kv, hp_.head_dim);
  const bool tiles = per_tile > 0 && prefill_attention_enabled();
  for (const auto& s : layout.seqs) {
    const bool q8 = in_q8(space_, s);
    if (tiles && s.n_rows >= cu::k_prefill_attention_min_rows) {
      auto& to = q8 ? out.tiles_q8 : out.tiles;
      for (std::int32_t r = 0; r < s.n_rows; r += per_tile) to.push_back({s.first_row + r, std::min(per_tile, s.n_rows - r)});
      continue;
    }
    auto& to = q8 ? out.decode_q8 : out.decode;
    auto& reach = q8 ? out.decode_positions_q8 : out.decode_positions;
    for (std::int32_t r = 0; r < s.n_rows; ++r) {
      to.push_back(s.first_row + r);
      reach = std::max(reach, pos[static_cast<std::size_t>(s.first_row + r)] + 1);
    }
  }
  // The tiles whose last row reaches furthest take longest: they go first.
  auto reach = [&](const cu::prefill_tile& t) { return pos[static_cast<std::size_t>(t.row0 + t.n_rows - 1)]; };
  for (auto* t : {&out.tiles, &out.tiles_q8})
    std::stable_sort(t->begin(), t->end(), [&](const auto& a, const auto& b) { return reach(a) > reach(b); });
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
  std::vector<std::int32_t> pos(static_cast<std::size_t>(n)), slots(pos.size()), slots_q8(pos.size()), first(pos.size(), 0);
  std::size_t stride = 0;
  for (const auto& s : layout.seqs) stride = std::max(stride, s.blocks.size());
  // One table for all rows when they are one sequence's (a prefill); else one per row.
  const bool one_table = layout.seqs.size() == 1;
  std::vector<std::int32_t> tables(one_table ? stride : pos.size() * stride, 0);
  std::int32_t max_pos = 0;
  for (const auto& s : layout.seqs) {
    // The attention kernels index each format's own pool: a q8_0 sequence's table holds its
    // blocks' indices within the q8_0 ids.
    const std::int32_t base = in_q8(space_, s) ? space_.base(kv::kv_format::q8_0) : 0;
    auto table_of = [&](std::vector<std::int32_t>::iterator to) {
      std::transform(s.blocks.begin(), s.blocks.end(), to, [base](std::int32_t b) { return b - base; });
    };
    if (one_table) table_of(tables.begin());
    for (std::int32_t r = 0; r < s.n_rows; ++r) {
      const auto row = static_cast<std::size_t>(s.first_row + r);
      const std::int32_t p = s.start_pos + r;
      pos[row] = p;
      const std::int32_t block = s.blocks[static_cast<std::size_t>(p / page_tokens_)];
      const bool q8 = in_q8(space_, s);
      slots[row] = q8 ? -1 : block * page_tokens_ + p % page_tokens_;
      slots_q8[row] = q8 ? space_.index_in_format(block) * page_tokens_ + p % page_tokens_ : -1;
      max_pos = std::max(max_pos, p + 1);
      if (!one_table) table_of(tables.begin() + static_cast<std::ptrdiff_t>(row * stride));
    }
  }
  st->blocks_stride = one_table ? 0 : static_cast<std::int32_t>(stride);
  const auto split = split_rows(layout, pos);
  std::size_t q8_rows = split.decode_q8.size();
  for (const auto& t : split.tiles_q8) q8_rows += static_cast<std::size_t>(t.n_rows);
  st->has_q8 = q8_rows > 0;
  st->has_f16 = q8_rows < static_cast<std::size_t>(n);
  st->n_tiles = static_cast<std::int32_t>(split.tiles.size());
  st->n_tiles_q8 = static_cast<std::int32_t>(split.tiles_q8.size());
  // Every row a decode row of one format: its kernel takes all rows; else each list its rows.
  const bool subsets = st->has_q8 ? (st->has_f16 || st->n_tiles_q8 > 0) : st->n_tiles > 0;
  st->max_positions = subsets || st->has_q8 ? split.decode_positions : max_pos;
  st->max_positions_q8 = subsets || !st->has_q8 ? split.decode_positions_q8 : max_pos;
  st->n_decode = subsets || st->has_q8 ? static_cast<std::int32_t>(split.decode.size()) : n;
  st->n_decode_q8 = subsets || !st->has_q8 ? static_cast<std::int32_t>(split.decode_q8.size()) : n;
  st->decode_subsets = subsets;
  auto put = [&](cu::device_buffer& b, const void* data, std::size_t bytes) {
    ensure(b, std::max<std::size_t>(bytes, 4));
    if (bytes > 0) b.upload(data, bytes, stream_);
  };
  if (subsets) {
    put(st->decode_rows, split.decode.data(), split.decode.size() * 4);
    put(st->decode_rows_q8, split.decode_q8.data(), split.decode_q8.size() * 4);
  }
  put(st->tiles, split.tiles.data(), split.tiles.size() * sizeof(cu::prefill_tile));
  put(st->tiles_q8, split.tiles_q8.data(), split.tiles_q8.size() * sizeof(cu::prefill_tile));
  const std::size_t rows_bytes = pos.size() * 4;
  ensure(st->hidden, hidden.size() * 4);
  ensure(st->pos, rows_bytes);
  ensure(st->slots, rows_bytes);
  ensure(st->slots_q8, rows_bytes);
  ensure(st->first, rows_bytes);
  ensure(st->last, rows_bytes);
  ensure(st->blocks, std::max<std::size_t>(tables.size(), 1) * 4);
  st->hidden.upload(hidden.data(), hidden.size() * 4, stream_);
  st->pos.upload(pos.data(), rows_bytes, stream_);
  st->slots.upload(slots.data(), rows_bytes, stream_);
  st->slots_q8.upload(slots_q8.data(), rows_bytes, stream_);
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
