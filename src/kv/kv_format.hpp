#pragma once
// KV formats and the block id space they share.
//
// A request's KV is f16 (kv_bits 16), q8_0 (8) or q4_0 (4), in GGUF's block layouts: every 32
// values of a position's row become one block of an f16 scale and 32 int8 (34 bytes) or 32 4-bit
// values (18 bytes). Each format has its own range of block ids, f16 first, so that a block id
// alone says how its pages are laid out; every layer's storage and the block pool agree on the
// ranges through one block_space.

#include <array>
#include <cstdint>
#include <optional>

namespace strata::kv {

enum class kv_format : std::uint8_t { f16 = 16, q8_0 = 8, q4_0 = 4 };

inline constexpr std::array<kv_format, 3> k_kv_formats{kv_format::f16, kv_format::q8_0, kv_format::q4_0};

constexpr int format_index(kv_format f) { return f == kv_format::f16 ? 0 : f == kv_format::q8_0 ? 1 : 2; }

constexpr std::optional<kv_format> kv_format_from_bits(int bits) {
  switch (bits) {
    case 16: return kv_format::f16;
    case 8: return kv_format::q8_0;
    case 4: return kv_format::q4_0;
    default: return std::nullopt;
  }
}

/// What stored q4_0 pages mean: revision 3 smooths, rotates and centers keys (the centering's mean
/// keys named by their digest next to it in the root, cache_namespace::q4_keys), smooths and
/// rotates queries and rotates values before quantizing them (src/model/q4_kv.hpp); revision 2 did
/// not center; revision 1 (whose cache roots did not name it)
/// rotated keys and queries only. A q4_0 cache's root hash carries it, so that blocks written
/// under another revision, on disk or in the cluster directory, never match and are never misread.
/// Move it whenever what q4_0 pages hold changes.
inline constexpr std::uint8_t k_q4_layout_revision = 3;

/// Values per quantization block of q8_0 and q4_0: quantized rows must be a multiple of it.
inline constexpr std::int64_t k_kv_quant_block = 32;

/// Bytes of n values of one position (n a multiple of 32 for the quantized formats).
constexpr std::int64_t kv_row_bytes(kv_format f, std::int64_t n) {
  switch (f) {
    case kv_format::f16: return 2 * n;
    case kv_format::q8_0: return n / k_kv_quant_block * 34;
    case kv_format::q4_0: return n / k_kv_quant_block * 18;
  }
  return 0;
}

/// How many blocks of each format exist, and so which ids each format owns: f16 ids
/// [0, capacity[0]), q8_0 ids after them, then q4_0.
struct block_space {
  std::array<std::int32_t, 3> capacity{};

  std::int32_t base(kv_format f) const {
    std::int32_t b = 0;
    for (int i = 0; i < format_index(f); ++i) b += capacity[static_cast<std::size_t>(i)];
    return b;
  }
  std::int32_t total() const { return capacity[0] + capacity[1] + capacity[2]; }
  std::int32_t count(kv_format f) const { return capacity[static_cast<std::size_t>(format_index(f))]; }
  kv_format format_of(std::int32_t id) const {
    if (id < capacity[0]) return kv_format::f16;
    return id < capacity[0] + capacity[1] ? kv_format::q8_0 : kv_format::q4_0;
  }
  std::int32_t index_in_format(std::int32_t id) const { return id - base(format_of(id)); }
};

}  // namespace strata::kv
