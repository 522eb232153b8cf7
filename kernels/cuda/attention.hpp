#pragma once
// Paged attention of decode rows over f16 or q8_0 KV pages on the GPU: one query row per sequence, the
// same function as kernels/attention.hpp's attention() for that row. Long contexts are split
// along the sequence over several blocks and the parts merged by log-sum-exp, as the CPU's
// merge_attention does.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>
#include <vector_types.h>

namespace strata::kernels::cuda {

/// One layer's K and V pools (device): page after page, a page holding page_tokens positions,
/// each a row of n_head_kv heads of head_dim values (the CPU's kv_page_view layout), in f16 or,
/// with bits = 8, in GGUF's q8_0 blocks (every 32 values an f16 scale and 32 int8, 34 bytes; the
/// bytes kernels::quantize_row writes).
struct kv_pages_f16 {
  const void* k = nullptr;
  const void* v = nullptr;
  int page_tokens = 32;
  int n_head_kv = 0;
  int head_dim = 0;  // 32, 64, 128 or 256
  int bits = 16;     // 16: f16 rows; 8: q8_0 rows
};

/// n_seq decode rows. Row s: q and out at s * n_head * head_dim (f32, device); it attends the
/// positions [first[s], last[s]] of its sequence, whose position p lies in page
/// blocks[s * blocks_stride + p / page_tokens]. first, last and blocks are device arrays;
/// max_positions (host) bounds every last[s] + 1 and sets how the rows are split.
struct decode_rows {
  const float* q = nullptr;
  float* out = nullptr;
  int n_seq = 0;
  int n_head = 0;  // a multiple of n_head_kv
  const std::int32_t* blocks = nullptr;
  int blocks_stride = 0;
  const std::int32_t* first = nullptr;
  const std::int32_t* last = nullptr;
  int max_positions = 0;
  float scale = 1.0f;    // multiplies q.k
  float softcap = 0.0f;  // 0: none, else s becomes softcap * tanh(s / softcap)
  /// When set (device, n_seq values): the rows taken are rows[0..n_seq) of q, out, first, last and
  /// the block tables, the others left alone (prefill rows of the same step go to
  /// prefill_attention).
  const std::int32_t* rows = nullptr;
  /// Parts per row: 0 chooses (as many as fill the device once, see decode_attention_splits);
  /// else at most this many (the bench compares choices with it).
  int splits = 0;
  /// When set (device; an act_q8's levels and block scales, rows of n_head * head_dim values): each
  /// row's output is also rounded there, as quantize_act would round `out` (the next matvec's
  /// input without a launch of its own).
  std::int8_t* out_q = nullptr;
  float2* out_ds = nullptr;
};

/// Positions one block takes at least before a row is split further; but a short row is split
/// into up to k_attention_short_parts parts of at least k_attention_min_short_split positions
/// (one trip of a block's streams at 128 values a head), rather than walked in trips one after
/// another by one or two blocks. On the H100, 128 positions: 2 parts 8.9 us, 8 parts 6.7 us;
/// 1,024 positions: 16 parts 10.1 us, 64 parts (parts of 16) 13.0 us.
constexpr int k_attention_min_split = 64;
constexpr int k_attention_min_short_split = 16;
constexpr int k_attention_short_parts = 8;
/// Most parts a row is split into.
constexpr int k_attention_max_splits = 64;

/// How many parts each row is split into for these rows on this device.
int decode_attention_splits(const kv_pages_f16& kv, const decode_rows& r);
/// Device scratch bytes decode_attention needs for these rows (0 when they are not split).
std::size_t decode_attention_workspace(const kv_pages_f16& kv, const decode_rows& r);
/// Queues the attention of the rows; workspace holds decode_attention_workspace bytes.
void decode_attention(const kv_pages_f16& kv, const decode_rows& r, void* workspace, std::size_t workspace_bytes,
                      cudaStream_t stream);

}  // namespace strata::kernels::cuda
