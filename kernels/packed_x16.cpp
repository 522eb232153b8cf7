#include "kernels/packed_x16.hpp"

#include <cstring>
#include <vector>

#include "kernels/quants.hpp"

namespace strata::kernels {
namespace {

/// Where the parts of one GGUF block of a packable type lie (-1: the type has none).
struct block_parts {
  int bytes = 0;   // the GGUF block
  int m_at = -1;   // f16 offset
  int qh_at = -1;  // u32 fifth bits
  int qs_at = 2;   // the levels: 32 bytes for q8_0, else 16 nibble bytes
  bool eight_bit = false;
};

block_parts parts_of(dtype t) {
  switch (t) {
    case dtype::q8_0: return {34, -1, -1, 2, true};
    case dtype::q4_0: case dtype::iq4_nl: return {18, -1, -1, 2, false};
    case dtype::q4_1: return {20, 2, -1, 4, false};
    case dtype::q5_0: return {22, -1, 2, 6, false};
    case dtype::q5_1: return {24, 2, 4, 8, false};
    default: return {};
  }
}

/// Bytes of a group block before its scales: the levels, then q5's fifth-bit masks.
std::size_t levels_bytes(const block_parts& p) { return p.eight_bit ? 512 : p.qh_at >= 0 ? 320 : 256; }

/// Copies GGUF block `src` (row i of its group) into group block g, or back (`back`).
void move_block(const block_parts& p, std::byte* g, int i, std::byte* block, bool back) {
  auto put = [&](std::byte* packed, std::byte* gguf, std::size_t n) {
    if (back) std::memcpy(gguf, packed, n);
    else std::memcpy(packed, gguf, n);
  };
  const std::size_t sc = levels_bytes(p);
  put(g + sc + 2 * i, block, 2);
  if (p.m_at >= 0) put(g + sc + 32 + 2 * i, block + p.m_at, 2);
  const int slices = p.eight_bit ? 8 : 4;
  for (int s = 0; s < slices; ++s) {
    std::byte* q = g + 64 * s + 4 * i;
    std::byte* b = block + p.qs_at + 4 * s;
    if (p.eight_bit && !back) {
      // Adding 128 to each level is flipping its top bit.
      std::uint32_t four;
      std::memcpy(&four, b, 4);
      four ^= 0x80808080u;
      std::memcpy(q, &four, 4);
    } else if (p.eight_bit) {
      std::uint32_t four;
      std::memcpy(&four, q, 4);
      four ^= 0x80808080u;
      std::memcpy(b, &four, 4);
    } else {
      put(q, b, 4);
    }
  }
  if (p.qh_at < 0) return;
  // Mask s holds bits 4s..4s+3 of each row's qh at bits 4i..4i+3.
  std::uint32_t qh = 0;
  if (!back) std::memcpy(&qh, block + p.qh_at, 4);
  for (int s = 0; s < 8; ++s) {
    std::uint64_t mask;
    std::memcpy(&mask, g + 256 + 8 * s, 8);
    if (back) {
      qh |= static_cast<std::uint32_t>((mask >> (4 * i)) & 0xF) << (4 * s);
    } else {
      mask = (mask & ~(std::uint64_t{0xF} << (4 * i))) | (static_cast<std::uint64_t>((qh >> (4 * s)) & 0xF) << (4 * i));
      std::memcpy(g + 256 + 8 * s, &mask, 8);
    }
  }
  if (back) std::memcpy(block + p.qh_at, &qh, 4);
}

}  // namespace

bool x16_packable(dtype t) { return parts_of(t).bytes != 0; }

std::size_t x16_block_bytes(dtype t) { return 16 * static_cast<std::size_t>(parts_of(t).bytes); }

std::size_t x16_scales_at(dtype t) { return levels_bytes(parts_of(t)); }

void pack_x16(dtype t, const void* src, std::int64_t rows, std::int64_t k, void* dst) {
  const block_parts p = parts_of(t);
  const auto* in = static_cast<const std::byte*>(src);
  auto* out = static_cast<std::byte*>(dst);
  const std::int64_t nb = k / k_qk;
  const std::size_t stride = row_bytes(t, k), grouped = stride * static_cast<std::size_t>(rows / 16 * 16);
  std::byte block[34];
  for (std::int64_t g = 0; g < rows / 16; ++g) {
    for (std::int64_t b = 0; b < nb; ++b, out += x16_block_bytes(t)) {
      for (int i = 0; i < 16; ++i) {
        std::memcpy(block, in + static_cast<std::size_t>(g * 16 + i) * stride + static_cast<std::size_t>(b * p.bytes), static_cast<std::size_t>(p.bytes));
        move_block(p, out, i, block, false);
      }
    }
  }
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
  // move_block reads the group block only: a copy of it lets the packed bytes stay const.
  std::vector<std::byte> g(x16_block_bytes(t));
  const std::byte* group = in + static_cast<std::size_t>(row / 16) * 16 * stride;
  for (std::int64_t b = 0; b < k / k_qk; ++b, group += g.size()) {
    std::memcpy(g.data(), group, g.size());
    move_block(p, g.data(), static_cast<int>(row % 16), out + b * p.bytes, true);
  }
}

void dequantize_x16_row(dtype t, const void* packed, std::int64_t rows, std::int64_t row, std::int64_t k, float* dst) {
  std::vector<std::byte> gguf(row_bytes(t, k));
  unpack_x16_row(t, packed, rows, row, k, gguf.data());
  dequantize_row(t, gguf.data(), dst, k);
}

}  // namespace strata::kernels
