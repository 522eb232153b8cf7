#include "kernels/quants.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/types.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::kernels {
namespace {

// Root-mean-square round-trip error relative to the RMS of N(0, 1) inputs.
constexpr double k_f16_round_trip = 1e-3;
constexpr double k_bf16_round_trip = 4e-3;
constexpr double k_q8_0_round_trip = 1e-2;
constexpr double k_q4_0_round_trip = 0.12;
constexpr double k_q4_1_round_trip = 0.09;
constexpr double k_q5_0_round_trip = 0.06;
constexpr double k_q5_1_round_trip = 0.05;
constexpr double k_iq4_nl_round_trip = 0.09;
constexpr double k_q4_k_round_trip = 0.12;
constexpr double k_q5_k_round_trip = 0.06;
constexpr double k_q6_k_round_trip = 0.04;
/// Eight magnitudes per sign and a power-of-two scale: the coarsest 4-bit grid.
constexpr double k_mxfp4_round_trip = 0.2;

template <class block>
std::vector<float> dequantize_block(dtype t, const block& b) {
  std::vector<float> out(static_cast<std::size_t>(block_elements(t)));
  dequantize_row(t, &b, out.data(), block_elements(t));
  return out;
}

/// n values from N(0.3, 2) drawn with `seed`.
std::vector<float> random_values(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.3f, 2.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = dist(gen);
  return x;
}

/// A hand-built block of a 32-value type: d = 0.5 (and m = -3 where the type has one), nibble
/// byte j = j | (15 - j) << 4, and (q5 types) the fifth bits of levels 1, 16 and 31.
template <class block>
block hand_built_block() {
  block b{};
  b.d = 0x3800;  // 0.5
  if constexpr (requires { b.m; }) b.m = 0xC200;  // -3
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  if constexpr (requires { b.qh; }) {
    const std::uint32_t qh = (1u << 1) | (1u << 16) | (1u << 31);
    std::memcpy(b.qh, &qh, 4);
  }
  return b;
}

TEST(quants, dequantizes_a_hand_built_q4_0_block) {
  const auto b = hand_built_block<block_q4_0>();
  auto y = dequantize_block(dtype::q4_0, b);
  EXPECT_FLOAT_EQ(y[0], -4.0f);   // (0 - 8) * 0.5
  EXPECT_FLOAT_EQ(y[9], 0.5f);    // (9 - 8) * 0.5
  EXPECT_FLOAT_EQ(y[16], 3.5f);   // high nibble of qs[0]: (15 - 8) * 0.5
  EXPECT_FLOAT_EQ(y[31], -4.0f);  // high nibble of qs[15]: (0 - 8) * 0.5
}

TEST(quants, dequantizes_a_hand_built_q4_1_block) {
  const auto b = hand_built_block<block_q4_1>();
  auto y = dequantize_block(dtype::q4_1, b);
  EXPECT_FLOAT_EQ(y[0], -3.0f);   // 0 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[9], 1.5f);    // 9 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[16], 4.5f);   // high nibble of qs[0]: 15 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[31], -3.0f);  // high nibble of qs[15]: 0 * 0.5 - 3
}

TEST(quants, dequantizes_a_hand_built_q5_0_block) {
  const auto b = hand_built_block<block_q5_0>();
  auto y = dequantize_block(dtype::q5_0, b);
  EXPECT_FLOAT_EQ(y[0], -8.0f);   // (0 - 16) * 0.5
  EXPECT_FLOAT_EQ(y[1], 0.5f);    // (1 + 16 - 16) * 0.5
  EXPECT_FLOAT_EQ(y[9], -3.5f);   // (9 - 16) * 0.5
  EXPECT_FLOAT_EQ(y[16], 7.5f);   // high nibble of qs[0] and bit 16: (15 + 16 - 16) * 0.5
  EXPECT_FLOAT_EQ(y[17], -1.0f);  // high nibble of qs[1]: (14 - 16) * 0.5
  EXPECT_FLOAT_EQ(y[31], 0.0f);   // high nibble of qs[15] and bit 31: (0 + 16 - 16) * 0.5
}

TEST(quants, dequantizes_a_hand_built_q5_1_block) {
  const auto b = hand_built_block<block_q5_1>();
  auto y = dequantize_block(dtype::q5_1, b);
  EXPECT_FLOAT_EQ(y[0], -3.0f);   // 0 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[1], 5.5f);    // 17 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[9], 1.5f);    // 9 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[16], 12.5f);  // 31 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[17], 4.0f);   // 14 * 0.5 - 3
  EXPECT_FLOAT_EQ(y[31], 5.0f);   // 16 * 0.5 - 3
}

TEST(quants, dequantizes_a_hand_built_iq4_nl_block) {
  const auto b = hand_built_block<block_iq4_nl>();
  auto y = dequantize_block(dtype::iq4_nl, b);
  EXPECT_FLOAT_EQ(y[0], -63.5f);  // index 0: -127 * 0.5
  EXPECT_FLOAT_EQ(y[7], -5.0f);   // index 7: -10 * 0.5
  EXPECT_FLOAT_EQ(y[8], 0.5f);    // index 8: 1 * 0.5
  EXPECT_FLOAT_EQ(y[16], 56.5f);  // high nibble of qs[0], index 15: 113 * 0.5
  EXPECT_FLOAT_EQ(y[20], 19.0f);  // high nibble of qs[4], index 11: 38 * 0.5
  EXPECT_FLOAT_EQ(y[31], -63.5f); // high nibble of qs[15], index 0
}

/// An mxfp4 block with e = 128 (half scale 1: the doubled e2m1 levels themselves), the nibble
/// bytes of hand_built_block; then e = 125 (half scale 1/8) and e = 1 (a denormal scale).
TEST(quants, dequantizes_a_hand_built_mxfp4_block) {
  block_mxfp4 b{};
  b.e = 128;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  auto y = dequantize_block(dtype::mxfp4, b);
  EXPECT_FLOAT_EQ(y[0], 0.0f);     // index 0
  EXPECT_FLOAT_EQ(y[7], 12.0f);    // index 7: 6 doubled
  EXPECT_FLOAT_EQ(y[8], 0.0f);     // index 8: -0
  EXPECT_FLOAT_EQ(y[13], -6.0f);   // index 13: -3 doubled
  EXPECT_FLOAT_EQ(y[16], -12.0f);  // high nibble of qs[0], index 15
  EXPECT_FLOAT_EQ(y[20], -3.0f);   // high nibble of qs[4], index 11
  b.e = 125;
  EXPECT_FLOAT_EQ(dequantize_block(dtype::mxfp4, b)[7], 1.5f);
  b.e = 1;
  EXPECT_FLOAT_EQ(dequantize_block(dtype::mxfp4, b)[1], std::ldexp(1.0f, -127));
}

/// Level j of a q5_0 / q5_1 block: nibble j in the q4_0 order, bit j of qh above it.
template <class block>
int q5_level(const block& b, int j) {
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const int nibble = j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4;
  return nibble | static_cast<int>(((qh >> j) & 1) << 4);
}

/// q5_0 quantization by ggml's reference definition: per block, the value of largest magnitude
/// max gives d = max / -16 (stored as f16), levels round(x / d) + 16 capped at 31 (only -max, at
/// 32, needs the cap), max itself at level 0; the values dequantize to (level - 16) * d, within
/// half a step (a whole one where capped, plus the f16 rounding of d) of the input.
TEST(quants, q5_0_quantizes_each_block_to_thirty_two_steps_from_its_largest_magnitude) {
  const unsigned seed = test_seed();
  constexpr int n_blocks = 64;
  std::vector<float> x = random_values(n_blocks * k_qk, seed), y(x.size());
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block: d = 0, every level 16
  // A block whose largest magnitude is positive and met again negated.
  for (int j = 64; j < 96; ++j) x[j] *= 0.1f;
  x[64 + 5] = 3.0f;
  x[64 + 20] = -3.0f;
  std::vector<block_q5_0> b(n_blocks);
  quantize_row(dtype::q5_0, x.data(), b.data(), static_cast<std::int64_t>(x.size()));
  dequantize_row(dtype::q5_0, b.data(), y.data(), static_cast<std::int64_t>(x.size()));
  for (int i = 0; i < n_blocks; ++i) {
    const float* xb = x.data() + i * k_qk;
    const float* top = std::max_element(xb, xb + k_qk, [](float a, float c) { return std::fabs(a) < std::fabs(c); });
    const float d = *top / -16.0f;
    ASSERT_EQ(b[i].d, fp32_to_fp16(d)) << "block " << i << " seed " << seed;
    const float dd = fp16_to_fp32(b[i].d);
    if (d != 0) {
      EXPECT_EQ(q5_level(b[i], static_cast<int>(top - xb)), 0) << "block " << i << " seed " << seed;
    }
    for (int j = 0; j < k_qk; ++j) {
      const int level = q5_level(b[i], j);
      const float exact = d != 0 ? xb[j] / d + 16.0f : 16.0f;
      const bool capped = exact > 31.5f;
      ASSERT_TRUE(capped ? level == 31 : std::fabs(static_cast<float>(level) - exact) <= 0.5f + 1e-4f)
          << "level " << level << " for " << exact << " block " << i << " element " << j << " seed " << seed;
      ASSERT_FLOAT_EQ(y[i * k_qk + j], static_cast<float>(level - 16) * dd) << "block " << i << " element " << j;
      ASSERT_NEAR(y[i * k_qk + j], xb[j], (capped ? 1.0f : 0.5f) * std::fabs(d) + 16 * std::fabs(dd - d) + 1e-6f)
          << "block " << i << " element " << j << " seed " << seed;
    }
  }
  EXPECT_EQ(q5_level(b[2], 20), 31) << "-max caps at 31";
}

/// Level j of a q4_0 / q4_1 block: nibble j in the GGUF order.
template <class block>
int q4_level(const block& b, int j) {
  return j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4;
}

/// Quantizes 64 random blocks (one of them constant: d = 0, every value is m) as `type` and checks
/// the definition q4_1 (top 15) and q5_1 (top 31) share: per block d = (max - min) / top and
/// m = min (both stored as f16), levels round((x - min) / d) capped at top; and the values
/// dequantize to within half a step (plus the f16 rounding of d and m) of the input.
template <class block, int (*level_of)(const block&, int)>
void expect_min_and_steps(dtype type, int top) {
  const unsigned seed = test_seed();
  constexpr int n_blocks = 64;
  std::vector<float> x = random_values(n_blocks * k_qk, seed), y(x.size());
  std::fill(x.begin() + 32, x.begin() + 64, 1.25f);
  std::vector<block> b(n_blocks);
  quantize_row(type, x.data(), b.data(), static_cast<std::int64_t>(x.size()));
  dequantize_row(type, b.data(), y.data(), static_cast<std::int64_t>(x.size()));
  for (int i = 0; i < n_blocks; ++i) {
    const float* xb = x.data() + i * k_qk;
    const float lo = *std::min_element(xb, xb + k_qk), hi = *std::max_element(xb, xb + k_qk);
    const float d = (hi - lo) / static_cast<float>(top);
    ASSERT_EQ(b[i].d, fp32_to_fp16(d)) << "block " << i << " seed " << seed;
    ASSERT_EQ(b[i].m, fp32_to_fp16(lo)) << "block " << i << " seed " << seed;
    const float dd = fp16_to_fp32(b[i].d), mm = fp16_to_fp32(b[i].m);
    for (int j = 0; j < k_qk; ++j) {
      const int level = level_of(b[i], j);
      // The nearest of the levels (a hair of slack for x * (1 / d) against x / d at a tie).
      const float exact = d > 0 ? (xb[j] - lo) / d : 0.0f;
      ASSERT_LE(std::fabs(static_cast<float>(level) - exact), 0.5f + 1e-4f)
          << "block " << i << " element " << j << " seed " << seed;
      ASSERT_FLOAT_EQ(y[i * k_qk + j], static_cast<float>(level) * dd + mm) << "block " << i << " element " << j;
      ASSERT_NEAR(y[i * k_qk + j], xb[j], 0.5f * d + static_cast<float>(top) * std::fabs(dd - d) + std::fabs(mm - lo) + 1e-6f)
          << "block " << i << " element " << j << " seed " << seed;
    }
  }
}

TEST(quants, q4_1_quantizes_each_block_to_its_min_and_sixteen_steps) {
  expect_min_and_steps<block_q4_1, q4_level<block_q4_1>>(dtype::q4_1, 15);
}

TEST(quants, q5_1_quantizes_each_block_to_its_min_and_thirty_two_steps) {
  expect_min_and_steps<block_q5_1, q5_level<block_q5_1>>(dtype::q5_1, 31);
}

/// Squared error of a block with scale d (as stored: f16) and each value at its nearest level.
float iq4_nl_nearest_error(const float* x, float d) {
  float err = 0;
  for (int j = 0; j < k_qk; ++j) {
    float best = std::numeric_limits<float>::infinity();
    for (std::int8_t v : k_iq4_nl_values) best = std::min(best, std::fabs(x[j] - d * static_cast<float>(v)));
    err += best * best;
  }
  return err;
}

/// iq4_nl quantization: every value sits at the table entry nearest to x / d for the stored d; d
/// stays near the scale that maps the block's largest magnitude max onto the most negative entry
/// (max / d in [-135, -103]); no block comes out worse than with that scale itself, and over many
/// blocks the search of scales takes off at least 5% of its squared error.
TEST(quants, iq4_nl_puts_each_value_at_the_nearest_table_entry_of_a_searched_scale) {
  const unsigned seed = test_seed();
  constexpr int n_blocks = 256;
  std::vector<float> x = random_values(n_blocks * k_qk, seed), y(x.size());
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block: d = 0
  std::vector<block_iq4_nl> b(n_blocks);
  quantize_row(dtype::iq4_nl, x.data(), b.data(), static_cast<std::int64_t>(x.size()));
  dequantize_row(dtype::iq4_nl, b.data(), y.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_EQ(fp16_to_fp32(b[1].d), 0.0f);
  double err = 0, plain_err = 0;
  for (int i = 0; i < n_blocks; ++i) {
    const float* xb = x.data() + i * k_qk;
    const float max = *std::max_element(xb, xb + k_qk, [](float a, float c) { return std::fabs(a) < std::fabs(c); });
    const float d = fp16_to_fp32(b[i].d);
    if (max != 0) {
      ASSERT_GE(max / d, -135.1f) << "block " << i << " seed " << seed;
      ASSERT_LE(max / d, -102.9f) << "block " << i << " seed " << seed;
    }
    for (int j = 0; j < k_qk; ++j) {
      const int index = j < 16 ? b[i].qs[j] & 0xF : b[i].qs[j - 16] >> 4;
      const float got = d * static_cast<float>(k_iq4_nl_values[index]);
      ASSERT_EQ(y[i * k_qk + j], got) << "block " << i << " element " << j;
      // The nearest entry (a hair of slack for x * (1 / d) against x / d at a midpoint).
      for (std::int8_t v : k_iq4_nl_values) {
        ASSERT_LE(std::fabs(xb[j] - got), std::fabs(xb[j] - d * static_cast<float>(v)) + 1e-5f * std::fabs(d))
            << "block " << i << " element " << j << " entry " << int(v) << " seed " << seed;
      }
    }
    const float block_err = iq4_nl_nearest_error(xb, d);
    const float plain = iq4_nl_nearest_error(xb, fp16_to_fp32(fp32_to_fp16(max / -127.0f)));
    ASSERT_LE(block_err, plain) << "block " << i << " seed " << seed;
    err += block_err;
    plain_err += plain;
  }
  EXPECT_LE(err, 0.95 * plain_err) << "seed " << seed;
}

TEST(quants, dequantizes_a_hand_built_q8_0_block) {
  block_q8_0 b{};
  b.d = 0x3400;  // 0.25
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::int8_t>(j - 16);
  auto y = dequantize_block(dtype::q8_0, b);
  EXPECT_FLOAT_EQ(y[0], -4.0f);
  EXPECT_FLOAT_EQ(y[16], 0.0f);
  EXPECT_FLOAT_EQ(y[31], 3.75f);
}

// Scales bytes giving (scale, min) per sub-block: (1,5) (2,6) (3,7) (4,8) (1,2) (3,4) (5,6) (23,8).
constexpr std::uint8_t k_scales[12] = {1, 2, 3, 0x44, 5, 6, 7, 8, 0x21, 0x43, 0x65, 0x87};

TEST(quants, dequantizes_a_hand_built_q4_k_block) {
  block_q4_k b{};
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, k_scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<std::uint8_t>((i % 16) | (((i + 3) % 16) << 4));
  auto y = dequantize_block(dtype::q4_k, b);
  EXPECT_FLOAT_EQ(y[0], -2.5f);  // low nibble of qs[0] = 0, sub-block 0: 1*0 - 0.5*5
  EXPECT_FLOAT_EQ(y[33], 5.0f);  // high nibble of qs[1] = 4, sub-block 1: 2*4 - 0.5*6
  EXPECT_FLOAT_EQ(y[200], 37.0f);  // low nibble of qs[104] = 8, sub-block 6: 5*8 - 0.5*6
  EXPECT_FLOAT_EQ(y[255], 42.0f);  // high nibble of qs[127] = 2, sub-block 7: 23*2 - 0.5*8
}

TEST(quants, dequantizes_a_hand_built_q5_k_block) {
  block_q5_k b{};
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, k_scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<std::uint8_t>((i % 16) | (((i + 3) % 16) << 4));
  b.qh[1] = 0x02;   // the fifth bit of element 33 (sub-block 1)
  b.qh[31] = 0x80;  // the fifth bit of element 255 (sub-block 7)
  auto y = dequantize_block(dtype::q5_k, b);
  EXPECT_FLOAT_EQ(y[0], -2.5f);
  EXPECT_FLOAT_EQ(y[33], 37.0f);   // 2*(4+16) - 3
  EXPECT_FLOAT_EQ(y[200], 37.0f);
  EXPECT_FLOAT_EQ(y[255], 410.0f);  // 23*(2+16) - 4
  EXPECT_FLOAT_EQ(y[1], -1.5f);  // low nibble of qs[1] = 1 (qh[1] bit 0 clear): 1*1 - 0.5*5
}

TEST(quants, dequantizes_a_hand_built_q6_k_block) {
  block_q6_k b{};
  b.d = 0x3800;  // 0.5
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<std::int8_t>(i - 8);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<std::uint8_t>((i % 16) | (((i * 7) % 16) << 4));
  for (auto& h : b.qh) h = 0xE4;  // high bits 0, 1, 2, 3 for the four quarters of each half
  auto y = dequantize_block(dtype::q6_k, b);
  EXPECT_FLOAT_EQ(y[0], 128.0f);   // q = 0 - 32, scale -8: 0.5 * -8 * -32
  EXPECT_FLOAT_EQ(y[45], 9.0f);    // low of ql[45] = 13 | 1 << 4 = 29 -> -3, scale[2] = -6
  EXPECT_FLOAT_EQ(y[100], -28.0f); // high of ql[36] = 12 | 3 << 4 = 60 -> 28, scale[6] = -2
  EXPECT_FLOAT_EQ(y[250], 77.0f);  // high of ql[122] = 6 | 3 << 4 = 54 -> 22, scale[15] = 7
}

TEST(quants, dequantizes_f16_bf16_and_f32) {
  const std::uint16_t h[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
  float y[4];
  dequantize_row(dtype::f16, h, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(y[3], 65504.0f);
  const std::uint16_t b[2] = {0x3F80, 0x4049};
  dequantize_row(dtype::bf16, b, y, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 3.140625f);
  const float f[2] = {1.5f, -7.0f};
  dequantize_row(dtype::f32, f, y, 2);
  EXPECT_EQ(y[1], -7.0f);
}

TEST(quants, f16_round_trips_every_finite_value_and_rounds_to_nearest_even) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<std::uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // a tie rounds to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // a tie rounds to even (up)
  EXPECT_EQ(fp32_to_fp16(70000.0f), 0x7C00);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
}

TEST(quants, round_trip_error_stays_within_each_types_bound) {
  const unsigned seed = test_seed();
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const std::int64_t n = 256 * 16;
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = dist(gen);
  struct bound {
    dtype t;
    double max_rel_rms;
  };
  for (auto [t, tol] : {bound{dtype::f16, k_f16_round_trip}, bound{dtype::bf16, k_bf16_round_trip},
                        bound{dtype::q8_0, k_q8_0_round_trip}, bound{dtype::q4_0, k_q4_0_round_trip},
                        bound{dtype::q4_1, k_q4_1_round_trip}, bound{dtype::q5_0, k_q5_0_round_trip},
                        bound{dtype::q5_1, k_q5_1_round_trip}, bound{dtype::iq4_nl, k_iq4_nl_round_trip},
                        bound{dtype::q4_k, k_q4_k_round_trip}, bound{dtype::q5_k, k_q5_k_round_trip},
                        bound{dtype::q6_k, k_q6_k_round_trip}, bound{dtype::mxfp4, k_mxfp4_round_trip},
                        bound{dtype::f32, 0.0}}) {
    std::vector<std::byte> q(row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    dequantize_row(t, q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      err += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
      ref += x[i] * static_cast<double>(x[i]);
    }
    EXPECT_LE(std::sqrt(err / ref), tol) << dtype_name(t) << " seed " << seed;
  }
}

TEST(types, names_and_sizes_follow_ggml) {
  EXPECT_STREQ(dtype_name(dtype::q4_k), "q4_K");
  EXPECT_STREQ(ggml_type_name(16), "iq2_xxs");
  EXPECT_STREQ(ggml_type_name(77), "unknown(77)");
  EXPECT_FALSE(dtype_from_id(10));  // q2_K
  EXPECT_FALSE(dtype_from_id(23));  // iq4_xs
  EXPECT_EQ(dtype_from_id(6), dtype::q5_0);
  EXPECT_EQ(dtype_from_id(7), dtype::q5_1);
  EXPECT_EQ(dtype_from_id(20), dtype::iq4_nl);
  EXPECT_STREQ(dtype_name(dtype::q5_0), "q5_0");
  EXPECT_STREQ(dtype_name(dtype::q5_1), "q5_1");
  EXPECT_STREQ(dtype_name(dtype::iq4_nl), "iq4_nl");
  for (dtype t : {dtype::q5_0, dtype::q5_1, dtype::iq4_nl}) EXPECT_EQ(block_elements(t), 32) << dtype_name(t);
  EXPECT_EQ(row_bytes(dtype::q5_0, 64), 44u);
  EXPECT_EQ(row_bytes(dtype::q5_1, 64), 48u);
  EXPECT_EQ(row_bytes(dtype::iq4_nl, 64), 36u);
  EXPECT_EQ(dtype_from_id(3), dtype::q4_1);
  EXPECT_STREQ(dtype_name(dtype::q4_1), "q4_1");
  EXPECT_EQ(block_elements(dtype::q4_1), 32);
  EXPECT_EQ(row_bytes(dtype::q4_1, 64), 40u);
  EXPECT_EQ(dtype_from_id(30), dtype::bf16);
  EXPECT_EQ(row_bytes(dtype::q6_k, 512), 420u);
  EXPECT_EQ(row_bytes(dtype::q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(dtype::bf16, 3), 6u);
}

}  // namespace
}  // namespace strata::kernels
