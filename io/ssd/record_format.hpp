#pragma once
// record_format: the 4096-byte header in front of every record of a segment file.
//
//   record = | header, 4096 B                 | payload, padded with zeros to a 4096 multiple |
//
//   header:
//     offset  size  field
//          0     8  magic "STRATAKV"
//          8     4  format version, u32 (k_format_version; 1 and 2 are read)
//         12     1  KV format, u8 (kv::kv_format: 16, 8 or 4)
//         13     1  flags, u8: 1 = the token ids follow the fixed part (a partial block)
//         14     1  record kind, u8 (record_kind: 0 = a KV block, 1 = a frozen boundary snapshot);
//                   from version 2 on, zero in version 1 (whose records are all blocks)
//         15     1  zero
//         16    16  model fingerprint, 2 x u64
//         32    32  block hash, 4 x u64
//         64    32  parent hash, 4 x u64
//         96     4  token count, i32
//        100     4  layer count, i32
//        104     8  payload length in bytes, u64 (the padding after it not counted)
//        112     8  xxh3-64 of the payload bytes
//        120     8  xxh3-64 of header bytes [0, 120)
//        128  4 x n token ids, i32, when flag 1 is set (n = the token count); zero otherwise
//          …        zero to 4096
//
// A partial block (the last, unfilled block of a finished sequence) carries its token ids: a
// later prompt may share only the first few of them, so it is matched token by token rather than
// by its hash. The header checksum then covers the ids too. Records without the flag read exactly
// as before it existed.
// A snapshot record is keyed, like its block, by the chain hash of the block that ends at its
// boundary; its payload is a serialized kv::state_snapshot and the layer count is the model's.
// Version 2 added the kind: a version-1 reader skips version-2 records as another version rather
// than reading a snapshot as a block, and a version-2 reader reads version-1 records as blocks.
// Little-endian. The magic, the payload length and the two checksums keep their offsets in every
// format version, so that a scan can verify a record of a version it does not read and step over it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "io/ssd/segment_store.hpp"

namespace strata::ssd {

/// Everything on disk is aligned to this: record offsets, header and padded payload lengths.
inline constexpr std::uint64_t k_block_bytes = 4096;
inline constexpr std::uint64_t k_header_bytes = 4096;
inline constexpr std::uint32_t k_format_version = 2;
/// The oldest format version still read (its records are blocks).
inline constexpr std::uint32_t k_oldest_format_version = 1;
inline constexpr std::array<char, 8> k_magic{'S', 'T', 'R', 'A', 'T', 'A', 'K', 'V'};
/// flags: the header carries the block's token ids.
inline constexpr std::uint8_t k_flag_token_ids = 1;
/// Most token ids a header has room for.
inline constexpr std::int32_t k_max_header_tokens = static_cast<std::int32_t>((k_header_bytes - 128) / 4);
/// A header announcing a longer payload is treated as garbage (a KV block is a few MiB at most).
inline constexpr std::uint64_t k_max_payload_bytes = 1ull << 30;

/// The fixed part of a header, as laid out on disk.
struct record_header {
  std::array<char, 8> magic{};
  std::uint32_t version = 0;
  std::uint8_t kv_format = 0;
  std::uint8_t flags = 0;
  std::uint8_t kind = 0;
  std::uint8_t reserved = 0;
  std::array<std::uint64_t, 2> model{};
  std::array<std::uint64_t, 4> hash{};
  std::array<std::uint64_t, 4> parent{};
  std::int32_t tokens = 0;
  std::int32_t layers = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t payload_xxh3 = 0;
  std::uint64_t header_xxh3 = 0;
};
static_assert(sizeof(record_header) == 128);
static_assert(offsetof(record_header, kind) == 14);
static_assert(offsetof(record_header, model) == 16);
static_assert(offsetof(record_header, hash) == 32);
static_assert(offsetof(record_header, parent) == 64);
static_assert(offsetof(record_header, payload_bytes) == 104);
static_assert(offsetof(record_header, header_xxh3) == 120);

constexpr std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

/// Bytes a record takes on disk: its header and its payload padded to 4096.
constexpr std::uint64_t record_bytes(std::uint64_t payload_bytes) {
  return k_header_bytes + round_up(payload_bytes, k_block_bytes);
}

/// Writes a whole record into `out` (record_bytes(payload.size()) bytes): the header, the payload
/// and the zero padding after each.
void encode_record(const record_meta& meta, const std::array<std::uint64_t, 2>& model,
                   std::span<const std::byte> payload, std::byte* out);

/// Fills in `h.header_xxh3` from the bytes before it (and, for a header with token ids, from the
/// ids in `block`, the 4096 header bytes).
void seal_header(record_header& h, const std::byte* block);

/// Why a header was not accepted.
enum class header_fault {
  none,
  /// The 4096 bytes are all zero: the clean end of a segment or a zeroed region.
  zero,
  bad_magic,
  bad_checksum,
  /// Checksum fine, but the payload length is impossible.
  bad_length,
};

/// The header of the 4096 bytes at `block` when its magic, checksum and payload length verify.
std::optional<record_header> decode_header(std::span<const std::byte> block, header_fault* fault = nullptr);

/// Whether this build reads a verified header's records: a known version, and a kind that
/// version knows (another version or kind is skipped at the scan, like another model's).
bool readable(const record_header& h);

/// The metadata a verified header carries; `block` is the whole 4096-byte header (for the token
/// ids of a partial block).
record_meta meta_of(const record_header& h, std::span<const std::byte> block);

/// xxh3-64 of a payload.
std::uint64_t payload_checksum(std::span<const std::byte> payload);

}  // namespace strata::ssd
