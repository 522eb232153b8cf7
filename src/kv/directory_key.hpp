#pragma once
// directory_key: the key under which the cluster directory lists the replicas holding a block.
//
//   strata:kv:<model fingerprint, 32 hex>:<kv format>:<block tokens>:<block hash, 64 hex>
//
// The model, the KV format and the block size are spelled out so that a key of one never names a
// block of another. A tenant's cache_salt is in the block hash itself (it seeds the chain's root:
// see prefix_hash.hpp), so two tenants' blocks never share a key either. No {hash tag}: the keys
// of one conversation spread over every master of the cluster.

#include <array>
#include <cstdint>
#include <string>

#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"

namespace strata::kv {

/// The part of every key before the format: "strata:kv:<fingerprint>:".
inline std::string directory_prefix(const std::array<std::uint64_t, 2>& model) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "strata:kv:";
  for (auto word : {model[1], model[0]})
    for (int i = 15; i >= 0; --i) s.push_back(digits[(word >> (4 * i)) & 15]);
  s.push_back(':');
  return s;
}

inline std::string directory_key(const std::string& prefix, kv_format f, std::int32_t block_tokens, const block_hash& h) {
  const char* format = f == kv_format::f16 ? "f16" : f == kv_format::q8_0 ? "q8_0" : "q4_0";
  return prefix + format + ":" + std::to_string(block_tokens) + ":" + h.hex();
}

/// Where a block's wire record is kept in Redis when it is small: the key with "kvv" for "kv"
/// (apart from the directory's keys, so that a scan of strata:kv:* finds only those).
inline std::string value_key(const std::string& key) { return "strata:kvv:" + key.substr(10); }

}  // namespace strata::kv
