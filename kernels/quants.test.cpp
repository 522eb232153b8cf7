#include "kernels/quants.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/types.hpp"

namespace strata::kernels {
namespace {

// Root-mean-square round-trip error relative to the RMS of N(0, 1) inputs.
constexpr double k_f16_round_trip = 1e-3;
constexpr double k_bf16_round_trip = 4e-3;
constexpr double k_q8_0_round_trip = 1e-2;
constexpr double k_q4_0_round_trip = 0.12;
constexpr double k_q4_k_round_trip = 0.12;
constexpr double k_q5_k_round_trip = 0.06;
constexpr double k_q6_k_round_trip = 0.04;

template <class block>
std::vector<float> dequantize_block(dtype t, const block& b) {
  std::vector<float> out(static_cast<std::size_t>(block_elements(t)));
  dequantize_row(t, &b, out.data(), block_elements(t));
  return out;
}

TEST(quants, dequantizes_a_hand_built_q4_0_block) {
  block_q4_0 b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  auto y = dequantize_block(dtype::q4_0, b);
  EXPECT_FLOAT_EQ(y[0], -4.0f);   // (0 - 8) * 0.5
  EXPECT_FLOAT_EQ(y[9], 0.5f);    // (9 - 8) * 0.5
  EXPECT_FLOAT_EQ(y[16], 3.5f);   // high nibble of qs[0]: (15 - 8) * 0.5
  EXPECT_FLOAT_EQ(y[31], -4.0f);  // high nibble of qs[15]: (0 - 8) * 0.5
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
  std::random_device rd;
  const unsigned seed = rd();
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
                        bound{dtype::q4_k, k_q4_k_round_trip}, bound{dtype::q5_k, k_q5_k_round_trip},
                        bound{dtype::q6_k, k_q6_k_round_trip}, bound{dtype::f32, 0.0}}) {
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
  EXPECT_FALSE(dtype_from_id(3));
  EXPECT_EQ(dtype_from_id(30), dtype::bf16);
  EXPECT_EQ(row_bytes(dtype::q6_k, 512), 420u);
  EXPECT_EQ(row_bytes(dtype::q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(dtype::bf16, 3), 6u);
}

}  // namespace
}  // namespace strata::kernels
