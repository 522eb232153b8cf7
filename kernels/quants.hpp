#pragma once
// Quantized block layouts (bit-exact with GGUF files) and row conversion to and from f32.

#include <cstdint>

#include "kernels/types.hpp"

namespace strata::kernels {

constexpr int k_qk = 32;    // elements per q4_0 / q4_1 / q5_0 / q5_1 / q8_0 / iq4_nl / mxfp4 block
constexpr int k_qk_k = 256; // elements per K-quant super-block

struct block_q4_0 {
  std::uint16_t d;              // f16 scale
  std::uint8_t qs[k_qk / 2];    // low nibbles: elements 0..15, high nibbles: 16..31; value = (q - 8) * d
};
/// The q4_0 nibble layout with an offset instead of the fixed -8: each block spans [m, m + 15 d].
struct block_q4_1 {
  std::uint16_t d;              // f16 scale
  std::uint16_t m;              // f16 offset (the block's minimum)
  std::uint8_t qs[k_qk / 2];    // low nibbles: elements 0..15, high nibbles: 16..31; value = q * d + m
};
/// q4_0 with a fifth bit per value: level j (0..31) is (nibble j) | (bit j of qh) << 4, the
/// nibbles in the q4_0 order; value = (level - 16) * d.
///
///   | d (f16) | qh: u32, bit j = bit 4 of level j | qs[16]: levels 0..15 low, 16..31 high nibbles |
struct block_q5_0 {
  std::uint16_t d;              // f16 scale
  std::uint8_t qh[4];           // the fifth bits, a little-endian u32 (2-byte aligned in files)
  std::uint8_t qs[k_qk / 2];
};
/// The q5_0 levels with an offset: value = level * d + m, each block spans [m, m + 31 d].
struct block_q5_1 {
  std::uint16_t d;              // f16 scale
  std::uint16_t m;              // f16 offset (the block's minimum)
  std::uint8_t qh[4];
  std::uint8_t qs[k_qk / 2];
};
/// The q4_0 nibble layout, each nibble an index into the non-linear k_iq4_nl_values:
/// value = k_iq4_nl_values[nibble] * d.
struct block_iq4_nl {
  std::uint16_t d;              // f16 scale
  std::uint8_t qs[k_qk / 2];    // low nibbles: elements 0..15, high nibbles: 16..31
};
/// iq4_nl's 16 levels: denser near zero, where most weights lie.
inline constexpr std::int8_t k_iq4_nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                    1,    13,   25,  38,  53,  69,  89,  113};
/// OCP microscaling FP4: 32 e2m1 values (sign, 2 exponent bits, 1 mantissa bit) sharing one
/// power-of-two scale (e8m0: 2^(e - 127)), in the q4_0 nibble order. The nibbles index
/// k_mxfp4_values, the e2m1 values doubled so that they are integers, so the scale is halved:
/// value = k_mxfp4_values[nibble] * 2^(e - 128).
struct block_mxfp4 {
  std::uint8_t e;               // e8m0 scale
  std::uint8_t qs[k_qk / 2];    // low nibbles: elements 0..15, high nibbles: 16..31
};
inline constexpr std::int8_t k_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
/// 2^(e - 128): half the e8m0 scale, the factor of k_mxfp4_values (e < 2 gives the denormals).
inline float e8m0_to_fp32_half(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
struct block_q8_0 {
  std::uint16_t d;
  std::int8_t qs[k_qk];
};
struct block_q4_k {
  std::uint16_t d, dmin;        // super-block scales for the 6-bit sub-block scales and mins
  std::uint8_t scales[12];      // 8 pairs (scale, min) of 6 bits
  std::uint8_t qs[k_qk_k / 2];
};
struct block_q5_k {
  std::uint16_t d, dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[k_qk_k / 8];  // the fifth bit
  std::uint8_t qs[k_qk_k / 2];
};
struct block_q6_k {
  std::uint8_t ql[k_qk_k / 2];  // low 4 bits
  std::uint8_t qh[k_qk_k / 4];  // high 2 bits
  std::int8_t scales[k_qk_k / 16];
  std::uint16_t d;
};
static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_mxfp4) == 17);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q4_k) == 144);
static_assert(sizeof(block_q5_k) == 176);
static_assert(sizeof(block_q6_k) == 210);

float fp16_to_fp32(std::uint16_t h);
std::uint16_t fp32_to_fp16(float f);
inline float bf16_to_fp32(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
/// Round to nearest even (NaN stays NaN).
std::uint16_t fp32_to_bf16(float f);

/// n elements of type t at src (n a multiple of the block size) to f32.
void dequantize_row(dtype t, const void* src, float* dst, std::int64_t n);
/// f32 to type t. q4_1, q5_1 and the K-quants use a straightforward per-(sub-)block min/max fit;
/// q4_0 and q5_0 map each block's largest magnitude to the most negative level, as ggml's
/// reference quantizers do; iq4_nl tries a few scales around that mapping (quant_iq4_nl); mxfp4
/// takes the power of two that fits the block's largest magnitude and the nearest level.
void quantize_row(dtype t, const float* src, void* dst, std::int64_t n);

}  // namespace strata::kernels
