#pragma once
// kv_events_actor: publishes the scheduler's block events for outside consumers, in vLLM's
// KV-event format over ZeroMQ (io/kv_events). Its first batch is an AllBlocksCleared, so that a
// consumer drops what it knew of an earlier run of this replica (kept for replay like any batch).
// Each tier is named by its medium, which depends on where the KV pool is (pool_memory: "GPU" on
// --device cuda, else "CPU", shared then with the host tier: medium_merge folds the two).
// Who sends to it: the scheduler (block_batch).

#include <memory>

#include "actors/kv_events/messages.hpp"
#include "actors/runtime/actor.hpp"
#include "io/kv_events/vllm_format.hpp"
#include "io/kv_events/zmq_publisher.hpp"

namespace strata::kv_events {

class kv_events_actor final : public actors::actor<inbox> {
 public:
  kv_events_actor(std::unique_ptr<zmq_publisher> publisher, std::int32_t block_size,
                  pool_memory pool = pool_memory::host);

  void receive(inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(block_batch b);

 private:
  std::unique_ptr<zmq_publisher> publisher_;
  std::int32_t block_size_;
  pool_memory pool_;
  medium_merge merge_;
};

}  // namespace strata::kv_events
