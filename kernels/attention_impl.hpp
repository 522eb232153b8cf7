#pragma once
// The attention loop shared by the scalar and SIMD variants, parameterized by the conversion of
// each KV format to f32 and by the two inner operations on f32 rows. Included only by attention.cpp, attention_avx2.cpp and
// attention_avx512.cpp, each of which instantiates it with its own operations (and compile
// target), so every instantiation stays inside its own translation unit.

#include <cstddef>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/quants.hpp"

// Everything here has internal linkage and calls no standard-library templates, so that no copy
// compiled for one target can stand in for another at link time.
namespace strata::kernels::detail {
namespace {

inline std::int64_t min_of(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

constexpr int k_attention_tile = 32;     // positions scored before the running maximum is updated

/// Floats from one row of a converted tile of keys or values to the next: the longest head and one
/// cache line more. At k_attention_max_head_dim (2 KiB) the 32 rows of a tile fell in the same few
/// L1 sets (8 of 64 at 64 values a head, 32 at 256) and, more lines than those sets hold, evicted
/// each other between their conversion and their use.
constexpr int k_attention_tile_stride = k_attention_max_head_dim + 16;
using tile_rows = float (*)[k_attention_tile_stride];

/// p[j] *= scale, then soft-capped (softcap > 0); returns the largest p[j] (n >= 1).
template <class Math>
inline float scale_scores(float* p, int n, float scale, float softcap) {
  if constexpr (requires { Math::scale_max(p, n, scale, softcap); }) {
    return Math::scale_max(p, n, scale, softcap);
  } else {
    float mx = -__builtin_inff();
    for (int j = 0; j < n; ++j) {
      float sc = p[j] * scale;
      if (softcap > 0.0f) sc = softcap * __builtin_tanhf(sc / softcap);
      p[j] = sc;
      mx = sc > mx ? sc : mx;
    }
    return mx;
  }
}

/// p[j] = e^(p[j] - shift); returns their sum. A score of -inf becomes exactly 0.
template <class Math>
inline float exp_scores(float* p, int n, float shift) {
  if constexpr (requires { Math::exp_sum(p, n, shift); }) {
    return Math::exp_sum(p, n, shift);
  } else {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += (p[j] = __builtin_expf(p[j] - shift));
    return sum;
  }
}

/// Load turns rows of one KV format into f32: static void rows(const std::byte* src, std::int64_t
/// stride, int n_rows, tile_rows dst, int n) converts n_rows rows of n
/// values, `stride` bytes apart. Math works on f32: static float dot(const float* a, const float* b,
/// int n) and static void axpy(float a, const float* x, float* acc, int n) (acc += a * x).
///
/// A row's result is its spans' results (attention_span) folded in order: each span is attended
/// by online softmax from a fresh state, a tile at a time, tiles on a fixed grid of positions.
///
/// A pass takes the query heads of one kv head (up to all of its group) for as many rows as fit in
/// k_attention_queries pairs, and walks the union of their position ranges a tile at a time. Each
/// tile of keys (then of values) is converted once and read by every pair; a row skips the tiles it
/// does not attend and masks the positions outside its range in the tiles it partly attends.
/// Math may also score a whole tile for several queries at once, static void scores_many(const
/// float* const* q, int nq, tile_rows k, int n, int hd, float* const* out) (out[i][j] = q[i] . k[j]);
/// add a whole tile of weighted values for several accumulators at once, static void
/// accumulate_many(const float* const* p, int nq, tile_rows v, int n, float* const* acc, int hd)
/// (acc[i] += sum_j p[i][j] v[j]); and do the softmax steps on vectors, scale_max and exp_sum (see
/// scale_scores and exp_scores). Where it does not, dot, axpy and scalar loops are used. Math may
/// also score and accumulate straight from the page rows, static bool scores_rows(Load, q, nq, const
/// std::byte* src, std::int64_t stride, int n, int hd, out) and accumulate_rows(Load, p, nq, src,
/// stride, n, acc, hd), with the same bits as the tile path; they return false where they do not
/// apply (the loop then converts the tile).
template <class Load, class Math>
inline void attention_loop(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows,
                           int head_begin, int head_end) {
  const int hd = s.head_dim;
  const int group = s.n_head / s.n_head_kv;
  const float neg_inf = -__builtin_inff();
  // The accumulators packed at the head size (rounded to 16 floats), not at the largest one: with
  // a stride of k_attention_max_head_dim floats the rows would all land in a few cache sets.
  alignas(64) float acc_buf[k_attention_queries * k_attention_max_head_dim];
  const int acc_stride = (hd + 15) / 16 * 16;
  auto acc = [&](int i) { return acc_buf + static_cast<std::ptrdiff_t>(i) * acc_stride; };
  // Each pair's spans folded so far (fold_attention), and their log-sum-exps.
  alignas(64) float tot_buf[k_attention_queries * k_attention_max_head_dim];
  auto tot = [&](int i) { return tot_buf + static_cast<std::ptrdiff_t>(i) * acc_stride; };
  float tot_lse[k_attention_queries];
  const std::int32_t span = attention_span(kv);
  alignas(64) float p[k_attention_queries][k_attention_tile];
  alignas(64) float tile[k_attention_tile][k_attention_tile_stride];
  float run_max[k_attention_queries], run_sum[k_attention_queries];
  bool live[k_attention_queries];
  // The pairs live in the current tile: their index, query, scores and accumulator.
  int pair[k_attention_queries];
  const float* qs[k_attention_queries];
  float* ps[k_attention_queries];
  float* accs[k_attention_queries];

  for (int h0 = head_begin; h0 < head_end;) {
    const int kvh = h0 / group;
    const int h1 = static_cast<int>(min_of(min_of(head_end, (kvh + 1) * group), h0 + k_attention_queries));
    const int nh = h1 - h0;
    const int rows_per_pass = k_attention_queries / nh;
    for (int r0 = 0; r0 < n_rows; r0 += rows_per_pass) {
      const attention_row* rs = rows + r0;
      const int nr = static_cast<int>(min_of(rows_per_pass, n_rows - r0));
      std::int32_t lo = rs[0].first, hi = rs[0].last;
      for (int r = 1; r < nr; ++r) {
        lo = rs[r].first < lo ? rs[r].first : lo;
        hi = rs[r].last > hi ? rs[r].last : hi;
      }
      for (int i = 0; i < nr * nh; ++i) {
        run_max[i] = neg_inf;
        run_sum[i] = 0.0f;
        tot_lse[i] = neg_inf;
        for (int d = 0; d < hd; ++d) acc(i)[d] = tot(i)[d] = 0.0f;
      }
      // Ends the open span: each pair that attended some of it folds its result there (normalized,
      // with its log-sum-exp) into its total and starts the next span afresh.
      auto close_span = [&] {
        for (int i = 0; i < nr * nh; ++i) {
          if (run_max[i] == neg_inf) continue;
          float* a = acc(i);
          const float inv = run_sum[i] > 0.0f ? 1.0f / run_sum[i] : 0.0f;
          for (int d = 0; d < hd; ++d) a[d] *= inv;
          const float part_lse = run_sum[i] > 0.0f ? run_max[i] + __builtin_logf(run_sum[i]) : neg_inf;
          fold_attention(tot(i), &tot_lse[i], a, &part_lse, 1, hd);
          run_max[i] = neg_inf;
          run_sum[i] = 0.0f;
          for (int d = 0; d < hd; ++d) a[d] = 0.0f;
        }
      };
      std::int32_t open_span = -1;
      // Tiles lie on a fixed grid, k_attention_tile positions from each page's start, whatever the
      // rows of the pass: a row's positions meet the same lanes and sums in any chunk.
      for (std::int32_t t0 = lo - lo % kv.page_tokens % k_attention_tile; t0 <= hi;) {
        // A tile never crosses a page, so its rows are evenly spaced.
        const std::int32_t slot = t0 % kv.page_tokens;
        const int n = static_cast<int>(min_of(min_of(k_attention_tile, kv.page_tokens - slot), hi - t0 + 1));
        const std::int32_t t1 = t0 + n - 1;
        bool any = false;
        for (int r = 0; r < nr; ++r) any |= live[r] = rs[r].first <= t1 && rs[r].last >= t0;
        if (!any) {
          t0 += n;
          continue;
        }
        if (t0 / span != open_span) {
          close_span();
          open_span = t0 / span;
        }
        const std::int64_t base = static_cast<std::int64_t>(kv.blocks[t0 / kv.page_tokens] - kv.block_offset) * kv.page_bytes +
                                  static_cast<std::int64_t>(slot) * kv.row_bytes + static_cast<std::int64_t>(kvh) * kv.head_bytes;
        if (t0 + n <= hi) {
          // Ask for the next tile's keys and values now: walking the pages, the loads would
          // otherwise wait on memory (the sequence's KV is rarely all in cache).
          const std::int32_t t2 = t0 + n, slot2 = t2 % kv.page_tokens;
          const int n2 = static_cast<int>(min_of(min_of(k_attention_tile, kv.page_tokens - slot2), hi - t2 + 1));
          const std::int64_t next = static_cast<std::int64_t>(kv.blocks[t2 / kv.page_tokens] - kv.block_offset) * kv.page_bytes +
                                    static_cast<std::int64_t>(slot2) * kv.row_bytes + static_cast<std::int64_t>(kvh) * kv.head_bytes;
          for (int j = 0; j < n2; ++j) {
            for (std::int64_t b = 0; b < kv.head_bytes; b += 64) {
              __builtin_prefetch(kv.k + next + j * kv.row_bytes + b);
              __builtin_prefetch(kv.v + next + j * kv.row_bytes + b);
            }
          }
        }
        // The (row, head) pairs of the rows that attend this tile.
        int np = 0;
        for (int r = 0; r < nr; ++r) {
          if (!live[r]) continue;
          for (int hh = 0; hh < nh; ++hh) {
            const int i = r * nh + hh;
            pair[np] = i;
            qs[np] = rs[r].q + static_cast<std::int64_t>(h0 + hh) * hd;
            ps[np] = p[i];
            accs[np] = acc(i);
            ++np;
          }
        }
        // Math may score the keys straight from the page (converting them in registers, with the
        // sums in the order of scores_many); where it does not, the tile is converted first.
        bool scored = false;
        if constexpr (requires { Math::scores_rows(Load{}, qs, np, kv.k + base, kv.row_bytes, n, hd, ps); })
          scored = Math::scores_rows(Load{}, qs, np, kv.k + base, kv.row_bytes, n, hd, ps);
        if (!scored) {
          Load::rows(kv.k + base, kv.row_bytes, n, tile, hd);
          if constexpr (requires { Math::scores_many(qs, np, tile, n, hd, ps); }) {
            Math::scores_many(qs, np, tile, n, hd, ps);
          } else {
            for (int t = 0; t < np; ++t) {
              for (int j = 0; j < n; ++j) ps[t][j] = Math::dot(qs[t], tile[j], hd);
            }
          }
        }
        for (int t = 0; t < np; ++t) {
          const int i = pair[t], r = i / nh;
          // The positions of this tile the row attends: [j_lo, j_hi).
          const int j_lo = rs[r].first > t0 ? rs[r].first - t0 : 0;
          const int j_hi = rs[r].last < t1 ? rs[r].last - t0 + 1 : n;
          float tile_max = scale_scores<Math>(p[i], n, s.scale, s.softcap);
          if (j_lo > 0 || j_hi < n) {
            tile_max = neg_inf;
            for (int j = 0; j < n; ++j) {
              if (j < j_lo || j >= j_hi) p[i][j] = neg_inf;
              else tile_max = p[i][j] > tile_max ? p[i][j] : tile_max;
            }
          }
          if (tile_max > run_max[i]) {
            // Rescale what was accumulated under the old maximum (nothing on the first tile).
            const float c = run_max[i] == neg_inf ? 0.0f : __builtin_expf(run_max[i] - tile_max);
            run_sum[i] *= c;
            for (int d = 0; d < hd; ++d) acc(i)[d] *= c;
            run_max[i] = tile_max;
          }
          run_sum[i] += exp_scores<Math>(p[i], n, run_max[i]);
        }
        // Likewise the values (Math takes them from the page where few pairs read each one).
        bool accumulated = false;
        if constexpr (requires { Math::accumulate_rows(Load{}, ps, np, kv.v + base, kv.row_bytes, n, accs, hd); })
          accumulated = Math::accumulate_rows(Load{}, ps, np, kv.v + base, kv.row_bytes, n, accs, hd);
        if (!accumulated) {
          Load::rows(kv.v + base, kv.row_bytes, n, tile, hd);
          if constexpr (requires { Math::accumulate_many(ps, np, tile, n, accs, hd); }) {
            Math::accumulate_many(ps, np, tile, n, accs, hd);
          } else {
            for (int t = 0; t < np; ++t) {
              for (int j = 0; j < n; ++j) Math::axpy(ps[t][j], tile[j], accs[t], hd);
            }
          }
        }
        t0 += n;
      }
      close_span();
      for (int r = 0; r < nr; ++r) {
        for (int hh = 0; hh < nh; ++hh) {
          const int i = r * nh + hh;
          float* o = rs[r].out + static_cast<std::int64_t>(h0 + hh) * hd;
          for (int d = 0; d < hd; ++d) o[d] = tot(i)[d];
          if (rs[r].lse) rs[r].lse[h0 + hh] = tot_lse[i];
        }
      }
    }
    h0 = h1;
  }
}

/// Scalar conversions of each KV format, shared by every variant for what its vector code leaves.
struct f16_rows {
  static void rows(const std::byte* src, std::int64_t stride, int n_rows, tile_rows dst, int n) {
    for (int r = 0; r < n_rows; ++r) {
      const auto* h = reinterpret_cast<const std::uint16_t*>(src + r * stride);
      for (int i = 0; i < n; ++i) dst[r][i] = fp16_to_fp32(h[i]);
    }
  }
};

struct q8_0_rows {
  static void rows(const std::byte* src, std::int64_t stride, int n_rows, tile_rows dst, int n) {
    for (int r = 0; r < n_rows; ++r) {
      const auto* b = reinterpret_cast<const block_q8_0*>(src + r * stride);
      for (int blk = 0; blk < n / k_qk; ++blk) {
        const float d = fp16_to_fp32(b[blk].d);
        for (int j = 0; j < k_qk; ++j) dst[r][blk * k_qk + j] = d * static_cast<float>(b[blk].qs[j]);
      }
    }
  }
};

struct q4_0_rows {
  static void rows(const std::byte* src, std::int64_t stride, int n_rows, tile_rows dst, int n) {
    for (int r = 0; r < n_rows; ++r) {
      const auto* b = reinterpret_cast<const block_q4_0*>(src + r * stride);
      for (int blk = 0; blk < n / k_qk; ++blk) {
        const float d = fp16_to_fp32(b[blk].d);
        float* o = dst[r] + blk * k_qk;
        for (int j = 0; j < k_qk / 2; ++j) {
          o[j] = d * static_cast<float>((b[blk].qs[j] & 15) - 8);
          o[j + k_qk / 2] = d * static_cast<float>((b[blk].qs[j] >> 4) - 8);
        }
      }
    }
  }
};

/// Runs the loop with the ops for the view's format.
template <class Math, class F16Load, class Q8Load, class Q4Load>
inline void attention_dispatch(const attention_shape& s, const kv_page_view& kv, const attention_row* rows, int n_rows,
                               int head_begin, int head_end) {
  switch (kv.format) {
    case dtype::q8_0: attention_loop<Q8Load, Math>(s, kv, rows, n_rows, head_begin, head_end); return;
    case dtype::q4_0: attention_loop<Q4Load, Math>(s, kv, rows, n_rows, head_begin, head_end); return;
    default: attention_loop<F16Load, Math>(s, kv, rows, n_rows, head_begin, head_end); return;
  }
}

}  // namespace
}  // namespace strata::kernels::detail
