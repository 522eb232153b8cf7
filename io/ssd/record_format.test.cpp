// record_format: the header's layout and checksum.
#include "io/ssd/record_format.hpp"

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace strata::ssd {
namespace {

constexpr std::array<std::uint64_t, 2> k_model{0x1234'5678'9abc'def0, 0x0fed'cba9'8765'4321};

TEST(record_format, a_header_is_128_bytes_whose_checksum_catches_every_flipped_bit) {
  std::mt19937_64 rng(test_seed());
  record_meta m;
  for (auto& w : m.hash.w) w = rng();
  std::vector<std::byte> payload(5000, std::byte{7});
  std::vector<std::byte> image(record_bytes(payload.size()));
  encode_record(m, k_model, payload, image.data());
  auto h = decode_header(image);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->payload_bytes, payload.size());
  EXPECT_TRUE(meta_of(*h, image).hash == m.hash);
  EXPECT_EQ(image.size(), 3 * 4096u);  // the header, and 5000 bytes padded to 8192
  for (std::size_t bit = 0; bit < 8 * sizeof(record_header); ++bit) {
    auto copy = image;
    copy[bit / 8] ^= std::byte(1u << (bit % 8));
    EXPECT_FALSE(decode_header(copy)) << "bit " << bit;
  }
  std::vector<std::byte> zero(4096);
  header_fault fault{};
  EXPECT_FALSE(decode_header(zero, &fault));
  EXPECT_EQ(fault, header_fault::zero);
}

TEST(record_format, a_partial_block_carries_its_token_ids_under_the_header_checksum) {
  std::mt19937_64 rng(test_seed());
  record_meta m;
  for (auto& w : m.hash.w) w = rng();
  m.tokens = 1 + static_cast<std::int32_t>(rng() % 31);
  for (std::int32_t i = 0; i < m.tokens; ++i) m.token_ids.push_back(static_cast<std::int32_t>(rng() % 150'000));
  std::vector<std::byte> payload(3000, std::byte{5});
  std::vector<std::byte> image(record_bytes(payload.size()));
  encode_record(m, k_model, payload, image.data());
  auto h = decode_header(image);
  ASSERT_TRUE(h);
  EXPECT_EQ(meta_of(*h, image).token_ids, m.token_ids);
  const std::size_t ids_end = sizeof(record_header) + m.token_ids.size() * sizeof(std::int32_t);
  for (std::size_t bit = 8 * sizeof(record_header); bit < 8 * ids_end; ++bit) {
    auto copy = image;
    copy[bit / 8] ^= std::byte(1u << (bit % 8));
    EXPECT_FALSE(decode_header(copy)) << "bit " << bit;
  }
  // A token count past the room in the header is refused, not read beyond it.
  record_header big = *h;
  big.tokens = k_max_header_tokens + 1;
  std::memcpy(image.data(), &big, sizeof big);
  EXPECT_FALSE(decode_header(image));
  // Ids that do not number the token count are refused: one too many, and (when one id would still
  // be left: no ids at all is a full block's record, whose count is its block's) one too few.
  m.token_ids.push_back(7);
  EXPECT_THROW(encode_record(m, k_model, payload, image.data()), std::invalid_argument);
  if (m.tokens >= 2) {
    m.token_ids.resize(static_cast<std::size_t>(m.tokens - 1));
    EXPECT_THROW(encode_record(m, k_model, payload, image.data()), std::invalid_argument);
  }
}

TEST(record_format, a_snapshot_record_keeps_its_kind_and_is_keyed_apart_from_its_block) {
  std::mt19937_64 rng(test_seed());
  record_meta m;
  for (auto& w : m.hash.w) w = rng();
  m.kind = record_kind::snapshot;
  m.layers = 24;
  m.tokens = 512;
  std::vector<std::byte> payload(7000, std::byte{3});
  std::vector<std::byte> image(record_bytes(payload.size()));
  encode_record(m, k_model, payload, image.data());
  auto h = decode_header(image);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->version, k_format_version);
  EXPECT_TRUE(readable(*h));
  const record_meta back = meta_of(*h, image);
  EXPECT_EQ(back.kind, record_kind::snapshot);
  EXPECT_TRUE(back.hash == m.hash);
  EXPECT_EQ(back.layers, 24);
  EXPECT_EQ(back.tokens, 512);
  EXPECT_FALSE(record_key(back) == m.hash);
  EXPECT_TRUE(snapshot_key(record_key(back)) == m.hash);
  // A kind this build does not know is skipped, not read as a block.
  record_header unknown = *h;
  unknown.kind = 9;
  EXPECT_FALSE(readable(unknown));
}

TEST(record_format, a_version_1_header_reads_as_a_block_and_never_as_a_snapshot) {
  std::mt19937_64 rng(test_seed());
  record_meta m;
  for (auto& w : m.hash.w) w = rng();
  std::vector<std::byte> payload(100, std::byte{1});
  std::vector<std::byte> image(record_bytes(payload.size()));
  encode_record(m, k_model, payload, image.data());
  auto h = decode_header(image);
  ASSERT_TRUE(h);
  record_header old = *h;
  old.version = 1;
  seal_header(old, image.data());
  std::memcpy(image.data(), &old, sizeof old);
  auto back = decode_header(image);
  ASSERT_TRUE(back);
  EXPECT_TRUE(readable(*back));
  EXPECT_EQ(meta_of(*back, image).kind, record_kind::block);
  // Version 1 had no kind: a nonzero byte there is not a record of it.
  old.kind = 1;
  seal_header(old, image.data());
  EXPECT_FALSE(readable(old));
  old.version = k_format_version + 1;
  old.kind = 0;
  EXPECT_FALSE(readable(old));
}

}  // namespace
}  // namespace strata::ssd
