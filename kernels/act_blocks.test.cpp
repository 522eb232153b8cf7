// Quantized activation rows hold the values of GGUF's activation blocks (q8_1 for groups of 32,
// q8_K for groups of 256), so that a quantized product is the one the GGUF block formulas give,
// and two engines that follow them agree up to the order of float additions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/quants.hpp"
#include "kernels/simd.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

/// One q8_1 block as the format defines it: levels x * 127 / max|x| rounded to nearest even,
/// d = max|x| / 127 and s = d * (sum of the levels), each stored as f16.
struct q8_1_block {
  std::int8_t qs[32];
  float d, s;
};

float f16_rounded(float f) { return fp16_to_fp32(fp32_to_fp16(f)); }

q8_1_block q8_1_of(const float* x) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float inv = amax > 0 ? 127.0f / amax : 0.0f, d = amax / 127.0f;
  q8_1_block b{};
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    b.qs[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * inv));
    sum += b.qs[j];
  }
  b.d = f16_rounded(d);
  b.s = f16_rounded(d * static_cast<float>(sum));
  return b;
}

/// Normal values with a few exact zeros, one all-zero block and a spread of magnitudes.
std::vector<float> activations(std::int64_t k, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(-6.0f, 4.0f);
  std::vector<float> x(static_cast<std::size_t>(k));
  for (std::int64_t b = 0; b < k / 32; ++b) {
    const float s = std::exp2(scale(gen));
    for (int j = 0; j < 32; ++j) x[static_cast<std::size_t>(b * 32 + j)] = dist(gen) * s;
  }
  x[3] = 0;
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);
  return x;
}

std::vector<simd_level> enabled_levels() {
  std::vector<simd_level> out;
  for (simd_level l : {simd_level::scalar, simd_level::avx2, simd_level::avx512})
    if (simd_level_enabled(l)) out.push_back(l);
  return out;
}

/// An act_row buffer, 64-byte aligned.
struct row_buffer {
  std::vector<std::byte> bytes;
  explicit row_buffer(act_format fmt, std::int64_t k) : bytes(act_row_bytes(fmt, k) + 64) {}
  std::byte* data() {
    auto a = reinterpret_cast<std::uintptr_t>(bytes.data());
    return bytes.data() + (64 - a % 64) % 64;
  }
};

TEST(activation_blocks, groups_of_32_hold_q8_1_blocks_with_their_f16_scale_and_scaled_sum) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const std::int64_t k = 2048;
  const std::vector<float> x = activations(k, gen);
  for (simd_level level : enabled_levels()) {
    row_buffer buf(act_format::q8_32, k);
    const act_row a = quantize_activations(kernels_for(level), act_format::q8_32, x.data(), k, buf.data());
    for (std::int64_t b = 0; b < k / 32; ++b) {
      const q8_1_block want = q8_1_of(x.data() + b * 32);
      ASSERT_EQ(0, std::memcmp(want.qs, a.qs + b * 32, 32)) << simd_level_name(level) << " block " << b << " seed " << seed;
      ASSERT_EQ(want.d, a.d[b]) << simd_level_name(level) << " block " << b << " seed " << seed;
      ASSERT_EQ(want.s, a.s[b]) << simd_level_name(level) << " block " << b << " seed " << seed;
    }
  }
}

TEST(activation_blocks, groups_of_256_hold_q8_k_scales_the_inverse_of_the_level_scale) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const std::int64_t k = 256 * 64;
  const std::vector<float> x = activations(k, gen);
  for (simd_level level : enabled_levels()) {
    row_buffer buf(act_format::q8_256, k);
    const act_row a = quantize_activations(kernels_for(level), act_format::q8_256, x.data(), k, buf.data());
    for (std::int64_t b = 0; b < k / 256; ++b) {
      float amax = 0;
      for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(b * 256 + j)]));
      ASSERT_EQ(1.0f / (127.0f / amax), a.d[b]) << simd_level_name(level) << " block " << b << " seed " << seed;
    }
  }
}

/// q4_1 and q5_1 rows against q8_1 activations: per block d_w d_x sum(levels_w levels_x) + m_w s_x,
/// the offset m_w taking the activation block's f16 scaled sum s_x.
TEST(activation_blocks, q4_1_and_q5_1_dots_take_the_weight_offsets_times_the_scaled_sums) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  const std::int64_t k = 2048;
  const std::vector<float> x = activations(k, gen);
  std::normal_distribution<float> wdist(0.3f, 0.05f);  // offsets far from zero: their term dominates
  std::vector<float> wf(static_cast<std::size_t>(k)), w_deq(wf.size());
  for (auto& v : wf) v = wdist(gen);
  for (dtype t : {dtype::q4_1, dtype::q5_1}) {
    std::vector<std::byte> w(row_bytes(t, k));
    quantize_row(t, wf.data(), w.data(), k);
    dequantize_row(t, w.data(), w_deq.data(), k);
    const std::size_t block_bytes = row_bytes(t, 32);
    double want = 0, scale = 0;
    for (std::int64_t b = 0; b < k / 32; ++b) {
      std::uint16_t m16;
      std::memcpy(&m16, w.data() + static_cast<std::size_t>(b) * block_bytes + 2, 2);
      const double m = fp16_to_fp32(m16);
      const q8_1_block xb = q8_1_of(x.data() + b * 32);
      for (int j = 0; j < 32; ++j) {
        const double term = (w_deq[static_cast<std::size_t>(b * 32 + j)] - m) * xb.d * xb.qs[j];
        want += term;
        scale += std::fabs(term);
      }
      want += m * xb.s;
      scale += std::fabs(m * xb.s);
    }
    for (simd_level level : enabled_levels()) {
      const kernel_table& kt = kernels_for(level);
      row_buffer buf(act_format::q8_32, k);
      const act_row a = quantize_activations(kt, act_format::q8_32, x.data(), k, buf.data());
      const float got = kt.row_dot[dtype_slot(t)](w.data(), a, k);
      EXPECT_NEAR(got, want, 1e-5 * scale) << dtype_name(t) << " " << simd_level_name(level) << " seed " << seed;
    }
  }
}

}  // namespace
}  // namespace strata::kernels
