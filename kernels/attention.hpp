#pragma once
// Scaled dot-product attention of query rows over a sequence's KV pages (f16, q8_0 or q4_0), with online
// softmax (one pass over the keys, no score buffer the size of the context). A scalar reference
// and AVX2 / AVX-512 variants; attention() uses the one picked once at start.

#include <cstddef>
#include <cstdint>

#include "kernels/simd.hpp"
#include "kernels/types.hpp"

namespace strata::kernels {

/// Longest head the kernels accept (their accumulators live on the stack).
constexpr int k_attention_max_head_dim = 512;
/// (row, query head) pairs that share one pass over the keys: rows beyond what fits with the heads
/// asked are taken in further passes.
constexpr int k_attention_queries = 128;
/// Most parts merge_attention merges.
constexpr int k_attention_merge_max_parts = 64;

/// Where one sequence's keys and values lie. The layer's K (and V) pool is an array of pages;
/// a page holds `page_tokens` positions, each a row of n_head_kv heads of head_dim values in the
/// page's format: f16, or GGUF's q8_0 / q4_0 blocks of 32 values (head_dim a multiple of 32):
///
///   k: | page 0: pos 0 [head 0 | head 1 | ...] pos 1 [...] ... | page 1 | ...
///
/// Position p of the sequence is slot p % page_tokens of page blocks[p / page_tokens] - block_offset.
/// Quantized pages are read as they are: each row is dequantized in registers as it is used.
struct kv_page_view {
  const std::byte* k = nullptr;  // the start of page 0
  const std::byte* v = nullptr;
  std::int64_t page_bytes = 0;   // page_tokens * row_bytes
  std::int64_t row_bytes = 0;    // one position: n_head_kv * head_bytes
  std::int64_t head_bytes = 0;   // one kv head's head_dim values
  std::int32_t page_tokens = 0;
  const std::int32_t* blocks = nullptr;
  std::int32_t block_offset = 0;
  dtype format = dtype::f16;     // f16, q8_0 or q4_0
};

struct attention_shape {
  int n_head = 0;
  int n_head_kv = 0;   // divides n_head; query head h reads kv head h / (n_head / n_head_kv)
  int head_dim = 0;    // at most k_attention_max_head_dim
  float scale = 1.0f;  // multiplies q.k
  float softcap = 0.0f;  // 0: none, else a score s becomes softcap * tanh(s / softcap)
};

/// One query row: q (n_head x head_dim, f32), where its output goes (same layout; only the heads
/// asked are written) and the positions it attends, [first, last]. When lse is set, each head asked
/// also gets the log-sum-exp of its scores over [first, last] (the log of its softmax denominator),
/// so that the results of one row over disjoint ranges can be merged (merge_attention).
struct attention_row {
  const float* q = nullptr;
  float* out = nullptr;
  std::int32_t first = 0;
  std::int32_t last = 0;
  float* lse = nullptr;  // n_head values, or null
};

/// For the query heads [head_begin, head_end) of each of the n_rows rows of one sequence:
/// out[h] = sum_t softmax_t(score(q[h], K[t])) V[t] over the row's positions t in [first, last].
/// The rows of one call share every tile of keys and values they all attend (each tile is converted
/// to f32 once for all of them), so a prefill chunk costs far less than its rows one by one.
using attention_fn = void (*)(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows,
                              int head_begin, int head_end);

/// One row's attention over the union of n_parts disjoint position ranges, from its results over
/// each (outs[i] with their log-sum-exps lses[i], as attention_row::lse gives them): out[h] =
/// sum_i e^(lses[i][h] - m) outs[i][h] / sum_i e^(lses[i][h] - m), m the largest lses[i][h]. A part
/// whose lse is -inf (it saw no position) weighs nothing. lse, when set, gets the union's
/// log-sum-exps. out may be outs[0] and lse lses[0].
void merge_attention(const float* const* outs, const float* const* lses, int n_parts, int n_head, int head_dim, float* out,
                     float* lse = nullptr);

/// Positions per span, at least: see attention_span.
constexpr std::int32_t k_attention_span_positions = 256;

/// The span of a row's positions that the kernels attend as a unit: whole pages, at least
/// k_attention_span_positions positions, aligned to multiples of its length. A row's result is
/// defined as its results over each span it meets (online softmax over aligned tiles, from a fresh
/// state), folded in position order by fold_attention; so it is the same bits whether the row is
/// attended in one call, beside any other rows, or span by span on several workers and folded.
inline std::int32_t attention_span(const kv_page_view& kv) {
  const std::int32_t pages = k_attention_span_positions / kv.page_tokens;
  return (pages > 1 ? pages : 1) * kv.page_tokens;
}

/// Folds one part (a row's result over a later range, with its log-sum-exps) into what came
/// before: out and lse become their merge (merge_attention of the two). An out of zeros with lse
/// -inf is the empty start, and folding a part into it gives that part exactly.
void fold_attention(float* out, float* lse, const float* part, const float* part_lse, int n_head, int head_dim);

/// The variant for a SIMD level (the caller checks simd_level_enabled).
attention_fn attention_for(simd_level level);

/// Runs the variant matching active_kernels().level.
void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end);

namespace scalar {
void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end);
}
namespace avx2 {
void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end);
}
namespace avx512 {
void attention(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows, int head_begin,
               int head_end);
}

}  // namespace strata::kernels
