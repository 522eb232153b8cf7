#include "kernels/matmul.hpp"

#include <algorithm>
#include <vector>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"

namespace strata::kernels {
namespace {

constexpr std::int64_t k_row_tile = 4;

/// Per-thread buffer for dequantized weight rows; grows on first use only.
float* scratch(std::size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

/// Row r of W as f32: a pointer into W for f32 weights, else dequantized into dst.
const float* row_f32(const kernel_table& kt, dtype wt, const std::byte* w, std::size_t row_stride, std::int64_t r,
                     std::int64_t k, float* dst) {
  const std::byte* src = w + static_cast<std::size_t>(r) * row_stride;
  switch (wt) {
    case dtype::f32: return reinterpret_cast<const float*>(src);
    case dtype::f16: kt.f16_to_f32(reinterpret_cast<const std::uint16_t*>(src), dst, k); return dst;
    default: dequantize_row(wt, src, dst, k); return dst;
  }
}

void matmul_rows(const kernel_table& kt, dtype wt, const std::byte* w, std::int64_t r0, std::int64_t r1,
                 std::int64_t rows, std::int64_t k, const float* x, std::int64_t m, float* y) {
  const std::size_t stride = row_bytes(wt, k);
  float* tile = scratch(static_cast<std::size_t>(k * k_row_tile));
  std::int64_t r = r0;
  if (m >= 4) {
    for (; r + k_row_tile <= r1; r += k_row_tile) {
      for (int t = 0; t < k_row_tile; ++t) {
        const float* src = row_f32(kt, wt, w, stride, r + t, k, tile + t * k);
        if (src != tile + t * k) std::copy(src, src + k, tile + t * k);
      }
      std::int64_t i = 0;
      float out[4][4];
      for (; i + 4 <= m; i += 4) {
        kt.dot_4x4(tile, x + i * k, k, out);
        for (int t = 0; t < 4; ++t)
          for (int c = 0; c < 4; ++c) y[(i + c) * rows + r + t] = out[t][c];
      }
      for (; i < m; ++i)
        for (int t = 0; t < 4; ++t) y[i * rows + r + t] = kt.dot(tile + t * k, x + i * k, k);
    }
  }
  for (; r < r1; ++r) {
    const float* wr = row_f32(kt, wt, w, stride, r, k, tile);
    for (std::int64_t i = 0; i < m; ++i) y[i * rows + r] = kt.dot(wr, x + i * k, k);
  }
}

}  // namespace

void matmul(compute_pool& pool, dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x,
            std::int64_t m, float* y) {
  const kernel_table& kt = active_kernels();
  const auto* wb = static_cast<const std::byte*>(w);
  // Small products are not worth waking the pool.
  if (rows * k * m < 32 * 1024 || pool.size() == 1) {
    matmul_rows(kt, wt, wb, 0, rows, rows, k, x, m, y);
    return;
  }
  pool.run([&](int ith, int nth) {
    std::int64_t b, e;
    compute_pool::split(rows, k_row_tile, ith, nth, b, e);
    if (b < e) matmul_rows(kt, wt, wb, b, e, rows, k, x, m, y);
  });
}

void matmul_reference(dtype wt, const void* w, std::int64_t rows, std::int64_t k, const float* x, std::int64_t m,
                      float* y) {
  std::vector<float> row(static_cast<std::size_t>(k));
  const auto* wb = static_cast<const std::byte*>(w);
  for (std::int64_t r = 0; r < rows; ++r) {
    dequantize_row(wt, wb + static_cast<std::size_t>(r) * row_bytes(wt, k), row.data(), k);
    for (std::int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < k; ++j) s += static_cast<double>(row[j]) * x[i * k + j];
      y[i * rows + r] = static_cast<float>(s);
    }
  }
}

}  // namespace strata::kernels
