#pragma once
// vllm_format: block events as vLLM publishes them (vllm/distributed/kv_events.py), so that the
// indexers built for vLLM (llm-d's, Dynamo's) can follow a strata replica. A batch is a msgpack
// array [ts, events]; each event an array whose first element is its tag:
//
//   ["BlockStored", block_hashes, parent_block_hash | nil, token_ids, block_size, lora_id, medium]
//   ["BlockRemoved", block_hashes, medium]
//   ["AllBlocksCleared"]
//
// Block hashes go as 32-byte bin values (the SHA-256 digest of src/kv/prefix_hash.hpp, in digest
// order); lora_id is nil. The medium names the memory a tier is in, as vLLM names it:
//
//   tier (kv_tier)   --device cpu   --device cuda
//   ram (the pool)   "CPU"          "GPU"   (the pool is HBM there)
//   host             "CPU"          "CPU"
//   ssd              "DISK"         "DISK"
//
// Stored events that continue one chain (each block's parent the one before) in one medium are
// merged into one BlockStored, as vLLM sends one per request; consecutive removals of a medium into
// one BlockRemoved. On the CPU the pool and the host tier share "CPU": medium_merge keeps a
// consumer's view of that medium whole (see there).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/kv/block_events.hpp"

namespace strata::kv_events {

/// The memory the KV pool (kv_tier::ram) is in: host memory (--device cpu) or the GPU's
/// (--device cuda).
enum class pool_memory : std::uint8_t { host, gpu };

/// The pool memory of a --device value: "cuda" is the GPU's, any other host memory.
pool_memory pool_memory_of(std::string_view device);

/// The medium name of a tier (see the table above).
std::string_view medium_of(kv::kv_tier t, pool_memory pool = pool_memory::host);

/// One batch, msgpack-encoded: `ts` in seconds since the epoch, blocks of `block_size` tokens.
std::string encode_batch(double ts, std::span<const kv::block_event> events, std::int32_t block_size,
                         pool_memory pool = pool_memory::host);

/// Where two tiers share a medium (the pool and the host tier, both "CPU" on the CPU), a consumer
/// that keeps the blocks of each medium must see a block stored there once and removed once the
/// last of them lets go of it, whatever order the tiers' own events come in. This keeps which of
/// those tiers hold each block and passes on only the events that change the medium's set; with
/// no shared medium (the GPU) every event passes.
class medium_merge {
 public:
  explicit medium_merge(pool_memory pool) : pool_(pool) {}
  /// The events a consumer of media is to see, in order.
  std::vector<kv::block_event> filter(std::vector<kv::block_event> events);
  /// Blocks held in a shared medium (for tests).
  std::size_t shared_blocks() const { return held_.size(); }

 private:
  pool_memory pool_;
  /// For each block in a shared medium: its tiers there, one bit per kv_tier.
  std::unordered_map<kv::block_hash, std::uint8_t, kv::block_hash_hasher> held_;
};

}  // namespace strata::kv_events
