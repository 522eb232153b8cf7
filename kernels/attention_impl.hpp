#pragma once
// The attention loop shared by the scalar and SIMD variants, parameterized by the two inner
// operations on f16 rows. Included only by attention.cpp, attention_avx2.cpp and
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

constexpr int k_attention_tile = 32;  // positions scored before the running maximum is updated
constexpr int k_attention_heads = 8;  // query heads that share one pass over the keys

/// Ops provides, for rows of n values in one KV format: static float dot(const float* q,
/// const std::byte* k, int n) and static void axpy(float a, const std::byte* v, float* acc, int n)
/// (acc += a * v).
template <class Ops>
inline void attention_loop(const attention_shape& s, const kv_page_view& kv, std::int32_t first, std::int32_t last,
                           const float* q, float* out, int head_begin, int head_end) {
  const int hd = s.head_dim;
  const int group = s.n_head / s.n_head_kv;
  const float neg_inf = -__builtin_inff();
  alignas(64) float acc[k_attention_heads][k_attention_max_head_dim];
  alignas(64) float p[k_attention_heads][k_attention_tile];
  float run_max[k_attention_heads], run_sum[k_attention_heads];

  for (int h0 = head_begin; h0 < head_end;) {
    const int kvh = h0 / group;
    const int h1 = static_cast<int>(min_of(min_of(head_end, (kvh + 1) * group), h0 + k_attention_heads));
    const int nh = h1 - h0;
    for (int i = 0; i < nh; ++i) {
      run_max[i] = neg_inf;
      run_sum[i] = 0.0f;
      for (int d = 0; d < hd; ++d) acc[i][d] = 0.0f;
    }
    for (std::int32_t t0 = first; t0 <= last;) {
      // A tile never crosses a page, so its rows are evenly spaced.
      const std::int32_t slot = t0 % kv.page_tokens;
      const int n = static_cast<int>(min_of(min_of(k_attention_tile, kv.page_tokens - slot), last - t0 + 1));
      const std::int64_t base = static_cast<std::int64_t>(kv.blocks[t0 / kv.page_tokens] - kv.block_offset) * kv.page_bytes +
                                static_cast<std::int64_t>(slot) * kv.row_bytes + static_cast<std::int64_t>(kvh) * kv.head_bytes;
      const std::byte* kr = kv.k + base;
      const std::byte* vr = kv.v + base;
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < nh; ++i) {
          float sc = Ops::dot(q + static_cast<std::int64_t>(h0 + i) * hd, kr + static_cast<std::int64_t>(j) * kv.row_bytes, hd) * s.scale;
          if (s.softcap > 0.0f) sc = s.softcap * __builtin_tanhf(sc / s.softcap);
          p[i][j] = sc;
        }
      for (int i = 0; i < nh; ++i) {
        float tile_max = p[i][0];
        for (int j = 1; j < n; ++j) tile_max = p[i][j] > tile_max ? p[i][j] : tile_max;
        if (tile_max > run_max[i]) {
          // Rescale what was accumulated under the old maximum (nothing on the first tile).
          const float c = run_max[i] == neg_inf ? 0.0f : __builtin_expf(run_max[i] - tile_max);
          run_sum[i] *= c;
          for (int d = 0; d < hd; ++d) acc[i][d] *= c;
          run_max[i] = tile_max;
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
          p[i][j] = __builtin_expf(p[i][j] - run_max[i]);
          sum += p[i][j];
        }
        run_sum[i] += sum;
      }
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < nh; ++i) Ops::axpy(p[i][j], vr + static_cast<std::int64_t>(j) * kv.row_bytes, acc[i], hd);
      t0 += n;
    }
    for (int i = 0; i < nh; ++i) {
      float* o = out + static_cast<std::int64_t>(h0 + i) * hd;
      const float inv = run_sum[i] > 0.0f ? 1.0f / run_sum[i] : 0.0f;
      for (int d = 0; d < hd; ++d) o[d] = acc[i][d] * inv;
    }
    h0 = h1;
  }
}

/// The scalar reading of quantized rows (GGUF q8_0 and q4_0 blocks of 32 values), shared by every
/// variant for what its vector code leaves over.
struct q8_0_rows {
  static float dot(const float* q, const std::byte* k, int n) {
    const auto* b = reinterpret_cast<const block_q8_0*>(k);
    float s = 0.0f;
    for (int blk = 0; blk < n / k_qk; ++blk, q += k_qk) {
      float t = 0.0f;
      for (int j = 0; j < k_qk; ++j) t += q[j] * static_cast<float>(b[blk].qs[j]);
      s += t * fp16_to_fp32(b[blk].d);
    }
    return s;
  }
  static void axpy(float a, const std::byte* v, float* acc, int n) {
    const auto* b = reinterpret_cast<const block_q8_0*>(v);
    for (int blk = 0; blk < n / k_qk; ++blk, acc += k_qk) {
      const float ad = a * fp16_to_fp32(b[blk].d);
      for (int j = 0; j < k_qk; ++j) acc[j] += ad * static_cast<float>(b[blk].qs[j]);
    }
  }
};

struct q4_0_rows {
  static float dot(const float* q, const std::byte* k, int n) {
    const auto* b = reinterpret_cast<const block_q4_0*>(k);
    float s = 0.0f;
    for (int blk = 0; blk < n / k_qk; ++blk, q += k_qk) {
      float t = 0.0f;
      for (int j = 0; j < k_qk / 2; ++j) {
        t += q[j] * static_cast<float>((b[blk].qs[j] & 15) - 8);
        t += q[j + k_qk / 2] * static_cast<float>((b[blk].qs[j] >> 4) - 8);
      }
      s += t * fp16_to_fp32(b[blk].d);
    }
    return s;
  }
  static void axpy(float a, const std::byte* v, float* acc, int n) {
    const auto* b = reinterpret_cast<const block_q4_0*>(v);
    for (int blk = 0; blk < n / k_qk; ++blk, acc += k_qk) {
      const float ad = a * fp16_to_fp32(b[blk].d);
      for (int j = 0; j < k_qk / 2; ++j) {
        acc[j] += ad * static_cast<float>((b[blk].qs[j] & 15) - 8);
        acc[j + k_qk / 2] += ad * static_cast<float>((b[blk].qs[j] >> 4) - 8);
      }
    }
  }
};

/// Runs the loop with the ops for the view's format.
template <class F16Ops, class Q8Ops, class Q4Ops>
inline void attention_dispatch(const attention_shape& s, const kv_page_view& kv, std::int32_t first, std::int32_t last,
                               const float* q, float* out, int head_begin, int head_end) {
  switch (kv.format) {
    case dtype::q8_0: attention_loop<Q8Ops>(s, kv, first, last, q, out, head_begin, head_end); return;
    case dtype::q4_0: attention_loop<Q4Ops>(s, kv, first, last, q, out, head_begin, head_end); return;
    default: attention_loop<F16Ops>(s, kv, first, last, q, out, head_begin, head_end); return;
  }
}

}  // namespace
}  // namespace strata::kernels::detail
