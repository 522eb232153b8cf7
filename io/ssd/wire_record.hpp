#pragma once
// wire_record: one block (or snapshot) as it travels between replicas, by value: the 4096-byte
// SSD record header (record_format.hpp: magic, version, model fingerprint, KV format, kind, hash,
// token count, payload length, both checksums) followed by the payload, unpadded.
//
//   | header, 4096 B | payload, payload_bytes B |
//
// GET /internal/kv/{hash} answers with one; a replica fetching a block checks it against what it
// asked for before anything of it reaches its cache. Every check that fails is a miss, never a
// wrong block: a short or long body, a bad magic or checksum, another model, format, kind or
// hash, a version this build does not read.

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "io/ssd/record_format.hpp"
#include "src/common/error.hpp"

namespace strata::ssd {

/// The header and the payload of one record, ready to send.
std::vector<std::byte> encode_wire_record(const record_meta& meta, const std::array<std::uint64_t, 2>& model,
                                          std::span<const std::byte> payload);

/// What a fetching replica expects of a wire record.
struct wire_expect {
  std::array<std::uint64_t, 2> model{};
  kv::kv_format format = kv::kv_format::f16;
  record_kind kind = record_kind::block;
  kv::block_hash hash;
  /// The most payload bytes accepted (the size cap); 0: k_max_payload_bytes.
  std::uint64_t max_payload = 0;
};

/// Why a wire record was refused.
enum class wire_fault { none, truncated, bad_header, bad_payload, other_model, other_format, other_kind, other_hash, too_large };
std::string_view to_string(wire_fault f);

/// A verified wire record: its metadata and its payload.
struct wire_record {
  record_meta meta;
  std::vector<std::byte> payload;
};

/// Checks `bytes` against `want` and returns its payload; on any fault, that fault (and nothing
/// of the bytes).
wire_record decode_wire_record(std::span<const std::byte> bytes, const wire_expect& want, wire_fault& fault);

}  // namespace strata::ssd
