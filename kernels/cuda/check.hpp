#pragma once
// What the CUDA kernel checks (check.cpp, check_attention.cpp, check_fused.cpp) share: the verdicts, the random
// inputs and device copies. The checks are a plain program, with no test framework, so that they
// build on the GPU machine from kernels/ alone.

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/device.hpp"

namespace strata::kernels::cuda::checks {

/// Counts and prints the verdicts.
struct verdicts {
  int failed = 0, passed = 0;
  void expect(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "  ok  " : "FAILED", what.c_str());
    std::fflush(stdout);
    ok ? ++passed : ++failed;
  }
};

/// ||a - ref|| / ||ref|| (infinity if a holds a NaN or an infinity: an unwritten or broken value).
inline double rel_l2(const float* a, const float* ref, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::vector<float> uniform(std::mt19937& rng, std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// A device copy of host values.
template <class T>
device_buffer to_device(const std::vector<T>& v) {
  device_buffer b(v.size() * sizeof(T));
  b.upload(v.data(), b.bytes(), nullptr);
  return b;
}

/// A device buffer of n floats, every byte 0xFF (NaN): what a kernel leaves unwritten stays NaN.
inline device_buffer poisoned(std::size_t n) {
  device_buffer b(n * sizeof(float));
  check(cudaMemset(b.data(), 0xFF, b.bytes()), "cudaMemset");
  return b;
}

inline std::vector<float> to_host(const device_buffer& b, std::size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float), nullptr);
  return v;
}

inline std::string fmt(const char* f, double a, double b = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

/// Random f16 (or, with bits = 8, q8_0: the CPU's quantize_row of random rows) K and V pages
/// (each sequence's, enough for its positions up to last[s], scattered over one pool in random
/// order) and the sequences' block tables, stride entries each.
struct random_pages {
  int page_tokens = 0, n_head_kv = 0, head_dim = 0, stride = 0, bits = 16;
  std::vector<std::uint16_t> k, v;  // the pools' bytes (q8_0 rows are 34-byte blocks: an even count)
  /// Bytes of one position's row.
  std::size_t row_bytes() const;
  std::vector<std::int32_t> table;
  /// The attention shape of n_head query heads over these pages (scale 1 / sqrt(head_dim)).
  attention_shape shape(int n_head, float softcap) const;
  /// The CPU's scalar attention of one query row of sequence seq over positions [first, last].
  void cpu_attention(const attention_shape& a, int seq, const float* q, float* out, int first, int last) const;
  /// The pages as the GPU kernels take them, kd and vd holding k and v.
  kv_pages_f16 on_device(const device_buffer& kd, const device_buffer& vd) const;
};
random_pages make_pages(std::mt19937& rng, int page_tokens, int n_head_kv, int head_dim, const std::vector<int>& last,
                        int bits = 16);

void check_attention(verdicts& v, std::mt19937& rng);
void check_prefill_attention(verdicts& v, std::mt19937& rng);
void check_fused(verdicts& v, std::mt19937& rng);

}  // namespace strata::kernels::cuda::checks
