#pragma once
// zmq_publisher: sends encoded KV-event batches on a ZeroMQ PUB socket as vLLM's publisher does,
// and answers replay requests from the last batches it sent.
//
//   PUB frames:    topic | sequence number (8 bytes, big-endian, from 0) | payload
//   replay (ROUTER): a client (REQ or DEALER) sends the first sequence number it lacks (8 bytes,
//                  big-endian); it gets one reply per buffered batch from there on
//                  (sequence number | payload), then an end marker: sequence -1 with an empty payload.
//
// ZeroMQ sockets block and belong to one thread, so the sockets live on a thread of their own,
// which sleeps in zmq_poll until a batch is handed over (through an inproc pair) or a replay
// request arrives. publish() only moves the payload into that pair: a PUB socket never blocks
// (slow subscribers lose messages past the high-water mark; they ask for a replay).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "src/common/error.hpp"

namespace strata::kv_events {

struct publisher_options {
  /// Where subscribers connect, e.g. tcp://*:5557 (bound here).
  std::string endpoint;
  /// Where replay requests come in, e.g. tcp://*:5558; empty: no replay.
  std::string replay_endpoint;
  std::string topic;
  /// Batches kept for replay.
  std::size_t buffer = 10'000;
};

class zmq_publisher {
 public:
  /// Binds the sockets and starts the thread; an error names the endpoint that could not be bound.
  static result<std::unique_ptr<zmq_publisher>> start(publisher_options opts);
  ~zmq_publisher();
  zmq_publisher(const zmq_publisher&) = delete;
  zmq_publisher& operator=(const zmq_publisher&) = delete;

  /// Queues one encoded batch; it gets the next sequence number. Safe from any thread.
  void publish(std::string payload);
  /// The endpoints as bound (a tcp port 0 or * resolved), for tests and logs.
  const std::string& endpoint() const { return bound_; }
  const std::string& replay_endpoint() const { return bound_replay_; }

 private:
  struct impl;
  explicit zmq_publisher(std::unique_ptr<impl> p);
  void run();

  std::unique_ptr<impl> impl_;
  std::mutex send_mutex_;
  std::string bound_, bound_replay_;
  std::thread thread_;
};

}  // namespace strata::kv_events
