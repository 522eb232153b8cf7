#pragma once
// Attention of a prefill chunk's rows on the tensor cores: flash attention (mma.sync m16n8k16,
// f16 in, f32 sums, online softmax) over the same paged f16 or q8_0 KV as decode_attention (q8_0
// values dequantized in registers into two f16 parts each), for the rows
// of a step that belong to a sequence with many rows. The rows are cut into tiles of consecutive
// rows of one sequence; a block takes one tile and one kv head, and the tile's rows times that kv
// head's query heads form the rows of its products, so that the query heads of one kv head share
// each K and V tile read from the pages. Decode rows keep decode_attention.

#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/attention.hpp"

namespace strata::kernels::cuda {

/// Rows a sequence needs in a step for its rows to take prefill_attention.
constexpr int k_prefill_attention_min_rows = 16;

/// A run of consecutive rows of one sequence (at most prefill_tile_rows of them), which share the
/// block table of the first: rows [row0, row0 + n_rows) of decode_rows' q and out.
struct prefill_tile {
  std::int32_t row0 = 0;
  std::int32_t n_rows = 0;
};

/// Rows per tile for this head grouping, or 0 when the kernel does not take it (more than 64
/// query heads per kv head, or a head size other than 32, 64, 128 or 256).
int prefill_tile_rows(int n_head, int n_head_kv, int head_dim);

/// Queues the attention of the rows that `tiles` (device, n_tiles of them) cover. Row i attends
/// [r.first[i], r.last[i]] over the pages of blocks + row0 * r.blocks_stride (row0: its tile's);
/// r.n_seq, r.max_positions and r.splits are not used. Tiles whose rows reach further should come
/// first (they take longest).
void prefill_attention(const kv_pages_f16& kv, const decode_rows& r, const prefill_tile* tiles, int n_tiles,
                       cudaStream_t stream);

}  // namespace strata::kernels::cuda
