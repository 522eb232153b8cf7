// wire_record: a block as replicas send it, and every way a fetched one is refused.
#include "io/ssd/wire_record.hpp"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace strata::ssd {
namespace {

constexpr std::array<std::uint64_t, 2> k_model{0x1111'2222'3333'4444, 0x5555'6666'7777'8888};

struct sample {
  record_meta meta;
  std::vector<std::byte> payload;
  std::vector<std::byte> wire;
  wire_expect want;
};

sample make_sample(std::mt19937_64& rng, kv::kv_format f = kv::kv_format::q8_0) {
  sample s;
  for (auto& w : s.meta.hash.w) w = rng();
  for (auto& w : s.meta.parent.w) w = rng();
  s.meta.format = f;
  s.meta.tokens = 32;
  s.meta.layers = 3;
  s.payload.resize(5000 + rng() % 3000);
  for (auto& b : s.payload) b = static_cast<std::byte>(rng());
  s.wire = encode_wire_record(s.meta, k_model, s.payload);
  s.want = wire_expect{k_model, f, record_kind::block, s.meta.hash, 0};
  return s;
}

wire_fault check(std::span<const std::byte> bytes, const wire_expect& want) {
  wire_fault fault{};
  auto r = decode_wire_record(bytes, want, fault);
  if (fault != wire_fault::none) EXPECT_TRUE(r.payload.empty());
  return fault;
}

TEST(wire_record, a_block_round_trips_with_its_header_and_no_padding) {
  std::mt19937_64 rng(test_seed());
  for (int i = 0; i < 8; ++i) {
    sample s = make_sample(rng);
    ASSERT_EQ(s.wire.size(), k_header_bytes + s.payload.size());
    wire_fault fault{};
    wire_record r = decode_wire_record(s.wire, s.want, fault);
    ASSERT_EQ(fault, wire_fault::none);
    EXPECT_EQ(r.payload, s.payload);
    EXPECT_TRUE(r.meta.hash == s.meta.hash);
    EXPECT_TRUE(r.meta.parent == s.meta.parent);
    EXPECT_EQ(r.meta.format, kv::kv_format::q8_0);
    EXPECT_EQ(r.meta.layers, 3);
  }
}

TEST(wire_record, a_flipped_bit_in_the_header_or_the_payload_is_refused) {
  std::mt19937_64 rng(test_seed());
  sample s = make_sample(rng);
  for (int i = 0; i < 200; ++i) {
    auto copy = s.wire;
    // Half in the checked header fields, half in the payload.
    const std::size_t at = i % 2 == 0 ? rng() % sizeof(record_header) : k_header_bytes + rng() % s.payload.size();
    copy[at] ^= std::byte(1u << (rng() % 8));
    const wire_fault f = check(copy, s.want);
    EXPECT_TRUE(f == (at < k_header_bytes ? wire_fault::bad_header : wire_fault::bad_payload)) << "byte " << at << ": " << to_string(f);
  }
}

TEST(wire_record, another_model_format_kind_or_hash_is_refused) {
  std::mt19937_64 rng(test_seed());
  sample s = make_sample(rng);
  wire_expect w = s.want;
  w.model[0] ^= 1;
  EXPECT_EQ(check(s.wire, w), wire_fault::other_model);
  w = s.want;
  w.format = kv::kv_format::f16;
  EXPECT_EQ(check(s.wire, w), wire_fault::other_format);
  w = s.want;
  w.kind = record_kind::snapshot;
  EXPECT_EQ(check(s.wire, w), wire_fault::other_kind);
  w = s.want;
  w.hash.w[3] ^= 1;
  EXPECT_EQ(check(s.wire, w), wire_fault::other_hash);
}

TEST(wire_record, a_truncated_extended_or_oversized_record_is_refused) {
  std::mt19937_64 rng(test_seed());
  sample s = make_sample(rng);
  EXPECT_EQ(check(std::span(s.wire).first(s.wire.size() - 1), s.want), wire_fault::truncated);
  EXPECT_EQ(check(std::span(s.wire).first(k_header_bytes), s.want), wire_fault::truncated);
  EXPECT_EQ(check(std::span(s.wire).first(100), s.want), wire_fault::truncated);
  EXPECT_EQ(check({}, s.want), wire_fault::truncated);
  auto longer = s.wire;
  longer.push_back(std::byte{0});
  EXPECT_EQ(check(longer, s.want), wire_fault::truncated);
  wire_expect capped = s.want;
  capped.max_payload = s.payload.size() - 1;
  EXPECT_EQ(check(s.wire, capped), wire_fault::too_large);
  std::vector<std::byte> garbage(s.wire.size(), std::byte{0x5a});
  EXPECT_EQ(check(garbage, s.want), wire_fault::bad_header);
}

TEST(wire_record, a_snapshot_travels_as_its_own_kind) {
  std::mt19937_64 rng(test_seed());
  sample s = make_sample(rng);
  s.meta.kind = record_kind::snapshot;
  s.wire = encode_wire_record(s.meta, k_model, s.payload);
  EXPECT_EQ(check(s.wire, s.want), wire_fault::other_kind);  // asked for a block
  s.want.kind = record_kind::snapshot;
  EXPECT_EQ(check(s.wire, s.want), wire_fault::none);
}

}  // namespace
}  // namespace strata::ssd
