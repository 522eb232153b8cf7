#include "actors/kv_events/kv_events_actor.hpp"

#include <chrono>

#include "io/kv_events/vllm_format.hpp"

namespace strata::kv_events {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

kv_events_actor::kv_events_actor(std::unique_ptr<zmq_publisher> publisher, std::int32_t block_size, pool_memory pool)
    : publisher_(std::move(publisher)), block_size_(block_size), pool_(pool), merge_(pool) {
  kv::block_event cleared;
  cleared.what = kv::block_event::kind::cleared;
  publisher_->publish(encode_batch(now_seconds(), std::span(&cleared, 1), block_size_, pool_));
}

void kv_events_actor::handle(block_batch b) {
  auto events = merge_.filter(std::move(b.events));
  if (events.empty()) return;
  publisher_->publish(encode_batch(now_seconds(), events, block_size_, pool_));
}

}  // namespace strata::kv_events
