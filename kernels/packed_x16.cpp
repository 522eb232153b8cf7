#include "kernels/packed_x16.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/quants.hpp"

namespace strata::kernels {
namespace {

/// Where the parts of one GGUF block of a packable type go in its group block. Runs of 4-byte
/// words: word w of row i goes to at + 64 w + 4 i. f16 values: row i's goes to at + 2 i.
struct word_run {
  int from = 0, words = 0, at = 0;
};
struct block_parts {
  int bytes = 0;                  // the GGUF block (0: the type is not packable)
  int values = 32;                // values per block
  word_run runs[3] = {};          // the levels first
  int halves[2][2] = {{-1, 0}, {-1, 0}};  // f16 fields: {from, at}; from -1: none
  int qh_from = -1;               // q5's u32 fifth bits, as 8 masks of 64 bits at 256
  bool flip = false;              // q8_0: the levels + 128
  int byte[2] = {-1, 0};          // a one-byte field (mxfp4's e8m0 scale): {from, at}, row i's at + i
};

block_parts parts_of(dtype t) {
  switch (t) {
    case dtype::q8_0: return {34, 32, {{2, 8, 0}}, {{0, 512}, {-1, 0}}, -1, true};
    case dtype::q4_0: case dtype::iq4_nl: return {18, 32, {{2, 4, 0}}, {{0, 256}, {-1, 0}}};
    case dtype::q4_1: return {20, 32, {{4, 4, 0}}, {{0, 256}, {2, 288}}};
    case dtype::q5_0: return {22, 32, {{6, 4, 0}}, {{0, 320}, {-1, 0}}, 2};
    case dtype::q5_1: return {24, 32, {{8, 4, 0}}, {{0, 320}, {2, 352}}, 4};
    case dtype::q4_k: return {144, 256, {{16, 32, 0}, {4, 3, 2048}}, {{0, 2240}, {2, 2272}}};
    case dtype::q6_k: return {210, 256, {{0, 32, 0}, {128, 16, 2048}, {192, 4, 3072}}, {{208, 3328}, {-1, 0}}};
    case dtype::mxfp4: return {17, 32, {{1, 4, 0}}, {{-1, 0}, {-1, 0}}, -1, false, {0, 256}};
    default: return {};
  }
}

/// Copies GGUF block `block` (row i of its group) into group block g, or back (`back`: g is read,
/// the block written).
template <bool back>
void move_block(const block_parts& p, std::conditional_t<back, const std::byte*, std::byte*> g, int i,
                std::conditional_t<back, std::byte*, const std::byte*> block) {
  auto put = [](auto* packed, auto* gguf, std::size_t n) {
    if constexpr (back) std::memcpy(gguf, packed, n);
    else std::memcpy(packed, gguf, n);
  };
  for (const word_run& r : p.runs) {
    for (int w = 0; w < r.words; ++w) {
      put(g + r.at + 64 * w + 4 * i, block + r.from + 4 * w, 4);
      if (p.flip) {
        // Adding 128 to each level is flipping its top bit.
        std::byte* to;
        if constexpr (back) to = block + r.from + 4 * w;
        else to = g + r.at + 64 * w + 4 * i;
        std::uint32_t four;
        std::memcpy(&four, to, 4);
        four ^= 0x80808080u;
        std::memcpy(to, &four, 4);
      }
    }
  }
  for (const auto& [from, at] : p.halves)
    if (from >= 0) put(g + at + 2 * i, block + from, 2);
  if (p.byte[0] >= 0) put(g + p.byte[1] + i, block + p.byte[0], 1);
  if (p.qh_from < 0) return;
  // Mask s holds bits 4s..4s+3 of each row's qh at bits 4i..4i+3.
  std::uint32_t qh = 0;
  if constexpr (!back) std::memcpy(&qh, block + p.qh_from, 4);
  for (int s = 0; s < 8; ++s) {
    std::uint64_t mask;
    std::memcpy(&mask, g + 256 + 8 * s, 8);
    if constexpr (back) {
      qh |= static_cast<std::uint32_t>((mask >> (4 * i)) & 0xF) << (4 * s);
    } else {
      mask = (mask & ~(std::uint64_t{0xF} << (4 * i))) | (static_cast<std::uint64_t>((qh >> (4 * s)) & 0xF) << (4 * i));
      std::memcpy(g + 256 + 8 * s, &mask, 8);
    }
  }
  if constexpr (back) std::memcpy(block + p.qh_from, &qh, 4);
}

}  // namespace

bool x16_packable(dtype t) { return parts_of(t).bytes != 0; }

std::size_t x16_block_bytes(dtype t) { return 16 * static_cast<std::size_t>(parts_of(t).bytes); }

void pack_x16(dtype t, const void* src, std::int64_t rows, std::int64_t k, void* dst) {
  const block_parts p = parts_of(t);
  const auto* in = static_cast<const std::byte*>(src);
  auto* out = static_cast<std::byte*>(dst);
  const std::int64_t nb = k / p.values;
  const std::size_t stride = row_bytes(t, k), grouped = stride * static_cast<std::size_t>(rows / 16 * 16);
  for (std::int64_t g = 0; g < rows / 16; ++g)
    for (std::int64_t b = 0; b < nb; ++b, out += x16_block_bytes(t))
      for (int i = 0; i < 16; ++i)
        move_block<false>(p, out, i, in + static_cast<std::size_t>(g * 16 + i) * stride + static_cast<std::size_t>(b * p.bytes));
  std::memcpy(static_cast<std::byte*>(dst) + grouped, in + grouped, stride * static_cast<std::size_t>(rows) - grouped);
}

void unpack_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, void* dst) {
  const block_parts p = parts_of(t);
  const auto* in = static_cast<const std::byte*>(packed);
  auto* out = static_cast<std::byte*>(dst);
  const std::size_t stride = row_bytes(t, k);
  if (row >= rows / 16 * 16) {
    std::memcpy(out, in + static_cast<std::size_t>(row) * stride, stride);
    return;
  }
  const std::byte* group = in + static_cast<std::size_t>(row / 16) * 16 * stride;
  for (std::int64_t b = 0; b < k / p.values; ++b, group += x16_block_bytes(t))
    move_block<true>(p, group, static_cast<int>(row % 16), out + b * p.bytes);
}

void dequantize_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, float* dst) {
  thread_local std::vector<std::byte> gguf;  // grows on first use only
  gguf.resize(std::max(gguf.size(), row_bytes(t, k)));
  unpack_x16_row(t, packed, rows, row, k, gguf.data());
  dequantize_row(t, gguf.data(), dst, k);
}

}  // namespace strata::kernels
