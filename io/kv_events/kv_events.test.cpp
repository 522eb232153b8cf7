// The msgpack forms, vLLM's KV-event batch layout, and the ZeroMQ publisher with its replay.

#include <algorithm>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "io/kv_events/msgpack_writer.hpp"
#include "io/kv_events/vllm_format.hpp"
#include "io/kv_events/zmq_publisher.hpp"
#include "tests/support/test_seed.hpp"

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

TEST(vllm_format, each_tier_is_named_by_the_medium_it_is_in_the_pool_by_the_device) {
  using kv::kv_tier;
  EXPECT_EQ(medium_of(kv_tier::ram), "CPU") << "the default: the pool in host memory";
  EXPECT_EQ(medium_of(kv_tier::ram, pool_memory::host), "CPU");
  EXPECT_EQ(medium_of(kv_tier::host, pool_memory::host), "CPU");
  EXPECT_EQ(medium_of(kv_tier::ssd, pool_memory::host), "DISK");
  EXPECT_EQ(medium_of(kv_tier::ram, pool_memory::gpu), "GPU") << "the pool is HBM on --device cuda";
  EXPECT_EQ(medium_of(kv_tier::host, pool_memory::gpu), "CPU");
  EXPECT_EQ(medium_of(kv_tier::ssd, pool_memory::gpu), "DISK");
  EXPECT_EQ(pool_memory_of("cuda"), pool_memory::gpu);
  EXPECT_EQ(pool_memory_of("cpu"), pool_memory::host);
  EXPECT_EQ(pool_memory_of(""), pool_memory::host);
}

/// The medium strings of a batch, in order (each event's last string, from its msgpack form).
std::vector<std::string> media_in(const std::string& batch) {
  std::vector<std::string> out;
  for (std::string m : {"CPU", "GPU", "DISK"}) {
    const std::string tag = std::string(1, static_cast<char>(0xa0 | m.size())) + m;
    for (auto at = batch.find(tag); at != std::string::npos; at = batch.find(tag, at + 1)) out.push_back(std::to_string(at) + m);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return std::stoul(a) < std::stoul(b); });
  for (auto& x : out) x.erase(0, x.find_first_not_of("0123456789"));
  return out;
}

TEST(vllm_format, a_batch_names_the_pool_gpu_on_the_gpu_and_the_host_tier_cpu_and_keeps_tiers_of_one_medium_together) {
  std::vector<kv::block_event> ev{stored(1, std::nullopt, {1, 2}), stored(2, 1, {3, 4})};
  ev[1].tier = kv::kv_tier::host;  // continues the chain, in another tier
  kv::block_event r;
  r.what = kv::block_event::kind::removed;
  r.tier = kv::kv_tier::ssd;
  r.hash.w[0] = 5;
  ev.push_back(r);
  // On the GPU: the pool's block is "GPU", the host tier's "CPU": two BlockStored.
  const std::string gpu = encode_batch(1.0, ev, 2, pool_memory::gpu);
  EXPECT_EQ(hex(gpu.substr(10, 1)), "93") << "three events";
  EXPECT_EQ(media_in(gpu), (std::vector<std::string>{"GPU", "CPU", "DISK"}));
  // On the CPU both are "CPU", one medium: the chain is one BlockStored.
  const std::string cpu = encode_batch(1.0, ev, 2, pool_memory::host);
  EXPECT_EQ(hex(cpu.substr(10, 1)), "92") << "two events";
  EXPECT_EQ(media_in(cpu), (std::vector<std::string>{"CPU", "DISK"}));
}

kv::block_event tier_event(kv::block_event::kind what, kv::kv_tier t, std::uint64_t h) {
  kv::block_event e;
  e.what = what;
  e.tier = t;
  e.hash.w[0] = h;
  return e;
}

TEST(medium_merge, on_the_cpu_a_block_in_the_pool_and_the_host_tier_is_stored_once_and_removed_when_both_let_go) {
  using kind = kv::block_event::kind;
  using kv::kv_tier;
  std::mt19937_64 rng(test_seed());
  medium_merge m(pool_memory::host);
  const std::uint64_t a = rng() | 1, b = rng() | 2;
  auto out = m.filter({tier_event(kind::stored, kv_tier::ram, a), tier_event(kind::stored, kv_tier::host, a),
                       tier_event(kind::stored, kv_tier::ssd, a), tier_event(kind::stored, kv_tier::host, b)});
  ASSERT_EQ(out.size(), 3u) << "a is in \"CPU\" once";
  EXPECT_EQ(out[0].tier, kv_tier::ram);
  EXPECT_EQ(out[1].tier, kv_tier::ssd);
  EXPECT_EQ(out[2].hash.w[0], b);
  out = m.filter({tier_event(kind::removed, kv_tier::ram, a), tier_event(kind::removed, kv_tier::ram, b)});
  EXPECT_TRUE(out.empty()) << "a is still in the host tier; b was never in the pool";
  out = m.filter({tier_event(kind::removed, kv_tier::host, a), tier_event(kind::removed, kv_tier::host, a)});
  ASSERT_EQ(out.size(), 1u) << "the last of the two let go, once";
  EXPECT_EQ(out[0].what, kind::removed);
  EXPECT_EQ(out[0].hash.w[0], a);
  out = m.filter({tier_event(kind::removed, kv_tier::ssd, a)});
  EXPECT_EQ(out.size(), 1u) << "the SSD's medium is its own";
  EXPECT_EQ(m.shared_blocks(), 1u);
  out = m.filter({kv::block_event{kind::cleared}});
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(m.shared_blocks(), 0u);
}

TEST(medium_merge, on_the_gpu_every_event_passes) {
  using kind = kv::block_event::kind;
  medium_merge m(pool_memory::gpu);
  const auto out = m.filter({tier_event(kind::stored, kv::kv_tier::ram, 1), tier_event(kind::stored, kv::kv_tier::host, 1),
                             tier_event(kind::removed, kv::kv_tier::ram, 1), tier_event(kind::removed, kv::kv_tier::host, 1)});
  EXPECT_EQ(out.size(), 4u);
  EXPECT_EQ(m.shared_blocks(), 0u);
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
