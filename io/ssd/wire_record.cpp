#include "io/ssd/wire_record.hpp"

#include <cstring>

namespace strata::ssd {

std::vector<std::byte> encode_wire_record(const record_meta& meta, const std::array<std::uint64_t, 2>& model,
                                          std::span<const std::byte> payload) {
  std::vector<std::byte> out(record_bytes(payload.size()));
  encode_record(meta, model, payload, out.data());
  out.resize(k_header_bytes + payload.size());  // the padding stays on disk
  return out;
}

std::string_view to_string(wire_fault f) {
  switch (f) {
    case wire_fault::none: return "none";
    case wire_fault::truncated: return "truncated";
    case wire_fault::bad_header: return "bad header";
    case wire_fault::bad_payload: return "bad payload checksum";
    case wire_fault::other_model: return "another model";
    case wire_fault::other_format: return "another KV format";
    case wire_fault::other_kind: return "another record kind or version";
    case wire_fault::other_hash: return "another block";
    case wire_fault::too_large: return "too large";
  }
  return "unknown";
}

wire_record decode_wire_record(std::span<const std::byte> bytes, const wire_expect& want, wire_fault& fault) {
  fault = wire_fault::none;
  if (bytes.size() < k_header_bytes) {
    fault = wire_fault::truncated;
    return {};
  }
  header_fault hf = header_fault::none;
  const auto h = decode_header(bytes.first(k_header_bytes), &hf);
  const std::uint64_t cap = want.max_payload > 0 ? want.max_payload : k_max_payload_bytes;
  if (!h) {
    fault = hf == header_fault::bad_length ? wire_fault::too_large : wire_fault::bad_header;
  } else if (h->model != want.model) {
    fault = wire_fault::other_model;
  } else if (!readable(*h) || h->kind != static_cast<std::uint8_t>(want.kind)) {
    fault = wire_fault::other_kind;
  } else if (h->kv_format != static_cast<std::uint8_t>(want.format) && want.kind == record_kind::block) {
    fault = wire_fault::other_format;
  } else if (h->hash != want.hash.w) {
    fault = wire_fault::other_hash;
  } else if (h->payload_bytes > cap) {
    fault = wire_fault::too_large;
  } else if (bytes.size() != k_header_bytes + h->payload_bytes) {
    fault = wire_fault::truncated;
  }
  if (fault != wire_fault::none) return {};
  const auto payload = bytes.subspan(k_header_bytes);
  if (payload_checksum(payload) != h->payload_xxh3) {
    fault = wire_fault::bad_payload;
    return {};
  }
  wire_record r;
  r.meta = meta_of(*h, bytes.first(k_header_bytes));
  r.payload.assign(payload.begin(), payload.end());
  return r;
}

}  // namespace strata::ssd
