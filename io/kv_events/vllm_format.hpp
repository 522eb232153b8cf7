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
// order); lora_id is nil; medium is "CPU" for the RAM tier and "DISK" for the SSD tier. Stored
// events that continue one chain (each block's parent the one before) in one tier are merged into
// one BlockStored, as vLLM sends one per request; consecutive removals of a tier into one BlockRemoved.

#include <span>
#include <string>
#include <string_view>

#include "src/kv/block_events.hpp"

namespace strata::kv_events {

/// The medium name of a tier.
std::string_view medium_of(kv::kv_tier t);

/// One batch, msgpack-encoded: `ts` in seconds since the epoch, blocks of `block_size` tokens.
std::string encode_batch(double ts, std::span<const kv::block_event> events, std::int32_t block_size);

}  // namespace strata::kv_events
