#include "io/ssd/record_format.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

#include <xxhash.h>

namespace strata::ssd {

static_assert(std::endian::native == std::endian::little, "records are written in the host's byte order");

namespace {

/// The bytes [0, 120) of the header, and the token ids after the fixed part when it has them.
/// `block` holds the whole header; the caller has checked that the ids fit in it.
std::uint64_t header_checksum(const record_header& h, const std::byte* block) {
  if (!(h.flags & k_flag_token_ids)) return XXH3_64bits(&h, offsetof(record_header, header_xxh3));
  // One contiguous run to hash: the fixed fields, then the ids.
  std::array<std::byte, k_header_bytes> bytes;
  const std::size_t fixed = offsetof(record_header, header_xxh3), ids = static_cast<std::size_t>(h.tokens) * sizeof(std::int32_t);
  std::memcpy(bytes.data(), &h, fixed);
  std::memcpy(bytes.data() + fixed, block + sizeof h, ids);
  return XXH3_64bits(bytes.data(), fixed + ids);
}

bool token_ids_fit(const record_header& h) {
  return !(h.flags & k_flag_token_ids) || (h.tokens >= 0 && h.tokens <= k_max_header_tokens);
}

}  // namespace

std::uint64_t payload_checksum(std::span<const std::byte> payload) {
  return XXH3_64bits(payload.data(), payload.size());
}

void seal_header(record_header& h, const std::byte* block) { h.header_xxh3 = header_checksum(h, block); }

void encode_record(const record_meta& meta, const std::array<std::uint64_t, 2>& model,
                   std::span<const std::byte> payload, std::byte* out) {
  record_header h;
  h.magic = k_magic;
  h.version = k_format_version;
  h.kv_format = static_cast<std::uint8_t>(meta.format);
  h.kind = static_cast<std::uint8_t>(meta.kind);
  h.model = model;
  h.hash = meta.hash.w;
  h.parent = meta.parent.w;
  h.tokens = meta.tokens;
  h.layers = meta.layers;
  h.payload_bytes = payload.size();
  h.payload_xxh3 = payload_checksum(payload);
  std::memset(out + sizeof h, 0, k_header_bytes - sizeof h);
  if (!meta.token_ids.empty()) {
    if (meta.token_ids.size() > static_cast<std::size_t>(k_max_header_tokens) || meta.tokens != static_cast<std::int32_t>(meta.token_ids.size())) {
      throw std::invalid_argument("a record's token ids must number its token count, at most " + std::to_string(k_max_header_tokens));
    }
    h.flags = k_flag_token_ids;
    std::memcpy(out + sizeof h, meta.token_ids.data(), meta.token_ids.size() * sizeof(std::int32_t));
  }
  seal_header(h, out);
  std::memcpy(out, &h, sizeof h);
  if (!payload.empty()) std::memcpy(out + k_header_bytes, payload.data(), payload.size());
  auto padded = round_up(payload.size(), k_block_bytes);
  std::memset(out + k_header_bytes + payload.size(), 0, padded - payload.size());
}

std::optional<record_header> decode_header(std::span<const std::byte> block, header_fault* fault) {
  auto set = [fault](header_fault f) {
    if (fault) *fault = f;
  };
  if (block.size() < k_header_bytes) {
    set(header_fault::bad_magic);
    return std::nullopt;
  }
  record_header h;
  std::memcpy(&h, block.data(), sizeof h);
  if (h.magic != k_magic) {
    bool zero = std::all_of(block.begin(), block.begin() + k_header_bytes, [](std::byte b) { return b == std::byte{0}; });
    set(zero ? header_fault::zero : header_fault::bad_magic);
    return std::nullopt;
  }
  if (!token_ids_fit(h) || header_checksum(h, block.data()) != h.header_xxh3) {
    set(header_fault::bad_checksum);
    return std::nullopt;
  }
  if (h.payload_bytes > k_max_payload_bytes) {
    set(header_fault::bad_length);
    return std::nullopt;
  }
  set(header_fault::none);
  return h;
}

bool readable(const record_header& h) {
  if (h.version == k_format_version) return h.kind <= static_cast<std::uint8_t>(record_kind::snapshot);
  return h.version >= k_oldest_format_version && h.version < k_format_version && h.kind == 0;
}

record_meta meta_of(const record_header& h, std::span<const std::byte> block) {
  record_meta m;
  if ((h.flags & k_flag_token_ids) && h.tokens > 0 && block.size() >= sizeof h + static_cast<std::size_t>(h.tokens) * 4) {
    m.token_ids.resize(static_cast<std::size_t>(h.tokens));
    std::memcpy(m.token_ids.data(), block.data() + sizeof h, m.token_ids.size() * sizeof(std::int32_t));
  }
  m.hash.w = h.hash;
  m.parent.w = h.parent;
  m.format = static_cast<kv::kv_format>(h.kv_format);
  m.kind = static_cast<record_kind>(h.kind);
  m.tokens = h.tokens;
  m.layers = h.layers;
  return m;
}

}  // namespace strata::ssd
