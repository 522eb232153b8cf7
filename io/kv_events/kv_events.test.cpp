// The msgpack forms, vLLM's KV-event batch layout, and the ZeroMQ publisher with its replay.

#include <thread>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "io/kv_events/msgpack_writer.hpp"
#include "io/kv_events/vllm_format.hpp"
#include "io/kv_events/zmq_publisher.hpp"

namespace strata::kv_events {
namespace {

std::string hex(const std::string& s) {
  static constexpr char d[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

TEST(msgpack_writer, writes_the_smallest_form_of_each_value_as_the_spec_gives_it) {
  msgpack_writer w;
  w.array(3);
  w.integer(5);
  w.integer(-1);
  w.integer(300);
  w.str("ab");
  w.nil();
  w.integer(-100);
  w.float64(1.0);
  EXPECT_EQ(hex(w.bytes()), "9305ffcd012ca26162c0d09ccb3ff0000000000000");
}

TEST(msgpack_writer, long_arrays_strings_and_binaries_take_their_length_prefixed_forms) {
  msgpack_writer w;
  w.array(16);
  w.str(std::string(40, 'x'));
  std::vector<std::byte> b(3, std::byte{7});
  w.bin(b);
  EXPECT_EQ(hex(w.bytes()).substr(0, 10), "dc0010d928");
  EXPECT_EQ(hex(w.bytes()).substr(10 + 80), "c403070707");
}

kv::block_event stored(std::uint64_t h, std::optional<std::uint64_t> parent, std::vector<std::int32_t> tokens) {
  kv::block_event e;
  e.hash.w[0] = h;
  if (parent) {
    kv::block_hash p;
    p.w[0] = *parent;
    e.parent = p;
  }
  e.token_ids = std::move(tokens);
  return e;
}

TEST(vllm_format, a_chain_of_stored_blocks_is_one_block_stored_event_and_removals_one_block_removed) {
  std::vector<kv::block_event> ev{stored(1, std::nullopt, {1, 2}), stored(2, 1, {3, 4}), stored(9, 7, {5, 6})};
  kv::block_event r;
  r.what = kv::block_event::kind::removed;
  r.hash.w[0] = 1;
  ev.push_back(r);
  ev.push_back(r);
  const std::string b = encode_batch(0.5, ev, 2);
  // [ts, [BlockStored(2 hashes), BlockStored(1 hash), BlockRemoved(2 hashes)]]
  EXPECT_EQ(hex(b.substr(0, 12)), "92cb3fe0000000000000" "93" "97");
  EXPECT_EQ(b.substr(12, 12), "\xab" "BlockStored");
  EXPECT_EQ(b.substr(24, 1), "\x92");       // two hashes
  EXPECT_EQ(hex(b.substr(25, 2)), "c420");  // bin 32
  EXPECT_NE(b.find("\x93\xac" "BlockRemoved\x92"), std::string::npos);
  EXPECT_NE(b.find("\xa3" "CPU"), std::string::npos);
}

TEST(zmq_publisher, subscribers_get_topic_sequence_and_payload_and_a_replay_returns_what_they_missed) {
  auto pub = zmq_publisher::start({"tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "kv", 100});
  ASSERT_TRUE(pub) << pub.err().message;
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect((*pub)->endpoint());
  // A subscriber may miss what goes out while it joins: publish until one arrives.
  std::vector<zmq::message_t> frames;
  for (int i = 0; i < 200 && frames.empty(); ++i) {
    (*pub)->publish("batch-" + std::to_string(i));
    zmq::message_t m;
    sub.set(zmq::sockopt::rcvtimeo, 20);
    while (sub.recv(m)) {
      frames.push_back(std::move(m));
      if (!frames.back().more()) break;
      m = zmq::message_t();
    }
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].to_string(), "kv");
  ASSERT_EQ(frames[1].size(), 8u);
  const auto* s = static_cast<const unsigned char*>(frames[1].data());
  std::uint64_t seq = 0;
  for (int i = 0; i < 8; ++i) seq = (seq << 8) | s[i];
  EXPECT_EQ(frames[2].to_string(), "batch-" + std::to_string(seq));

  // From sequence 0: every batch kept (a DEALER, as a REQ takes one reply per request).
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect((*pub)->replay_endpoint());
  std::string start(8, '\0');
  dealer.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start), zmq::send_flags::none);
  std::uint64_t expect = 0;
  while (true) {
    std::vector<zmq::message_t> reply;
    zmq::message_t m;
    do {
      ASSERT_TRUE(dealer.recv(m));
      reply.push_back(std::move(m));
      m = zmq::message_t();
    } while (reply.back().more());
    ASSERT_EQ(reply.size(), 3u);  // delimiter, sequence, payload
    const auto* q = static_cast<const unsigned char*>(reply[1].data());
    std::int64_t n = 0;
    for (int i = 0; i < 8; ++i) n = static_cast<std::int64_t>((static_cast<std::uint64_t>(n) << 8) | q[i]);
    if (n == -1) {
      EXPECT_EQ(reply[2].size(), 0u);
      break;
    }
    EXPECT_EQ(static_cast<std::uint64_t>(n), expect);
    EXPECT_EQ(reply[2].to_string(), "batch-" + std::to_string(expect));
    ++expect;
  }
  EXPECT_GT(expect, seq);
}

TEST(zmq_publisher, an_endpoint_that_cannot_be_bound_is_an_error_naming_it) {
  auto pub = zmq_publisher::start({"nonsense://x", "", "", 10});
  ASSERT_FALSE(pub);
  EXPECT_NE(pub.err().message.find("nonsense://x"), std::string::npos);
}

}  // namespace
}  // namespace strata::kv_events
