// segment_store at open and after damage: records of another model or version, torn, truncated,
// flipped and zeroed records, duplicates, and segments left with nothing valid.
#include "io/ssd/segment_store.test.hpp"

#include <fstream>

namespace strata::ssd::testing {
namespace {

/// Most recovery tests share one shape: records of one size written into one segment file, then
/// damaged on disk at a record's header or payload, then read back, often after a reopen.
class segment_store_recovery : public segment_store_test {
 protected:
  /// Writes `n` records of `payload` bytes into one segment file (recs_, file_) and leaves the
  /// store open; close() first to damage the file before the next open.
  segment_store& write_one_segment(int n, std::size_t payload) {
    options_ = one_segment_options();
    payload_ = payload;
    recs_ = make_records(n, payload);
    auto& s = open(options_);
    write_all(s, recs_);
    file_ = segment_files().at(0);
    return s;
  }
  /// The store opened again on the same directory.
  segment_store& reopen() { return open(options_); }

  /// Where record i begins in the segment file: its header; its payload follows the header.
  std::uint64_t record_at(int i) const { return static_cast<std::uint64_t>(i) * record_bytes(payload_); }
  std::uint64_t payload_at(int i) const { return record_at(i) + k_header_bytes; }

  /// Each record in `which` reads back from `s` with its own bytes.
  void expect_records_read_back(segment_store& s, std::initializer_list<int> which) {
    for (int i : which) expect_reads_back(s, recs_[static_cast<std::size_t>(i)], "record " + std::to_string(i));
  }

  store_options options_;
  std::size_t payload_ = 0;
  std::vector<record> recs_;
  fs::path file_;
};

TEST_F(segment_store_recovery, skips_records_of_another_model_at_open_and_keeps_them_on_disk) {
  auto o = options();
  std::vector<record> mine, theirs;
  for (int i = 0; i < 10; ++i) mine.push_back(make(20'000));
  for (int i = 0; i < 5; ++i) theirs.push_back(make(20'000));
  write_all(open(o), mine);

  auto other = o;
  other.model = k_other_model;
  auto& s = open(other);
  EXPECT_EQ(s.stats().records, 0u);
  EXPECT_FALSE(s.contains(mine[0].meta.hash));
  EXPECT_FALSE(s.read(mine[0].meta.hash, 1));
  write_all(s, theirs);

  auto& again = open(o);
  EXPECT_EQ(again.stats().records, mine.size());
  for (const auto& r : theirs) EXPECT_FALSE(again.contains(r.meta.hash));
  for (const auto& r : mine) expect_reads_back(again, r);
}

TEST_F(segment_store_recovery, skips_a_record_of_another_format_version_and_reads_the_ones_after_it) {
  write_one_segment(6, 30'000);
  close();
  // Rewrite record 2's header as a valid header of a format version after this build's.
  auto block = peek(file_, record_at(2), k_header_bytes);
  auto h = decode_header(block);
  ASSERT_TRUE(h);
  h->version = k_format_version + 1;
  seal_header(*h, block.data());
  poke(file_, record_at(2), std::as_bytes(std::span(&*h, 1)));

  auto& s = reopen();
  EXPECT_EQ(s.stats().records, recs_.size() - 1);
  EXPECT_FALSE(s.contains(recs_[2].meta.hash));
  expect_records_read_back(s, {0, 1, 3, 4, 5});
}

TEST_F(segment_store_recovery, a_segment_truncated_mid_payload_or_mid_header_loses_only_its_tail) {
  write_one_segment(6, 40'000);
  close();
  fs::resize_file(file_, payload_at(4) + 100);  // in record 4's payload
  {
    auto& s = reopen();
    EXPECT_EQ(s.stats().records, 4u);
    expect_first_readable(s, recs_, 6, 4);
    close();
  }
  fs::resize_file(segment_files().at(0), record_at(2) + 1000);  // in record 2's header
  auto& s = reopen();
  EXPECT_EQ(s.stats().records, 2u);
  expect_first_readable(s, recs_, 6, 2);
}

TEST_F(segment_store_recovery, a_flipped_payload_bit_is_a_miss_that_leaves_the_index) {
  auto& s = write_one_segment(5, 100'000);
  flip_bit(file_, payload_at(3) + rng_() % payload_, static_cast<int>(rng_() % 8));

  collected seen;
  EXPECT_FALSE(read_back(s, recs_[3].meta.hash, &seen));
  EXPECT_TRUE(seen.removed.contains(recs_[3].meta.hash.hex()));
  EXPECT_FALSE(s.contains(recs_[3].meta.hash));
  EXPECT_EQ(s.stats().read_failures, 1u);
  EXPECT_EQ(s.stats().records, recs_.size() - 1);
  EXPECT_FALSE(s.read(recs_[3].meta.hash, 7));  // no longer indexed
  expect_records_read_back(s, {0, 1, 2, 4});
  // After a restart the header still scans; the read fails again, never handing out the bytes.
  auto& again = reopen();
  EXPECT_FALSE(read_back(again, recs_[3].meta.hash));
  EXPECT_EQ(again.stats().read_failures, 1u);
}

TEST_F(segment_store_recovery, a_flipped_header_bit_is_skipped_at_open) {
  write_one_segment(5, 20'000);
  close();
  flip_bit(file_, record_at(3) + rng_() % sizeof(record_header), static_cast<int>(rng_() % 8));
  auto& s = reopen();
  EXPECT_EQ(s.stats().records, 3u);  // the scan cannot trust anything after a bad header
  expect_first_readable(s, recs_, 5, 3);
}

TEST_F(segment_store_recovery, a_zeroed_region_is_a_miss) {
  auto& s = write_one_segment(5, 50'000);
  std::vector<std::byte> zeros(8192);
  poke(file_, payload_at(1) + 4096, zeros);  // inside record 1's payload
  EXPECT_FALSE(read_back(s, recs_[1].meta.hash));
  EXPECT_FALSE(s.contains(recs_[1].meta.hash));

  poke(file_, record_at(3), zeros);  // record 3's header and the start of its payload
  auto& again = reopen();
  EXPECT_FALSE(again.contains(recs_[3].meta.hash));
  EXPECT_FALSE(read_back(again, recs_[1].meta.hash));
  expect_records_read_back(again, {0, 2});
}

TEST_F(segment_store_recovery, a_record_cut_off_the_file_after_indexing_reads_as_a_miss) {
  auto& s = write_one_segment(4, 70'000);
  fs::resize_file(file_, payload_at(3) + 4096);
  collected seen;
  EXPECT_FALSE(read_back(s, recs_[3].meta.hash, &seen));
  EXPECT_TRUE(seen.removed.contains(recs_[3].meta.hash.hex()));
  EXPECT_EQ(s.stats().read_failures, 1u);
  expect_records_read_back(s, {2});
}

TEST_F(segment_store_recovery, a_torn_final_write_never_reads_back_wrong_bytes) {
  write_one_segment(3, 90'000);
  close();
  auto end = fs::file_size(file_);

  // A valid header followed by only part of its payload, as a crash mid-write leaves it.
  auto torn = make(payload_);
  std::vector<std::byte> image(record_bytes(payload_));
  encode_record(torn.meta, k_model, torn.payload, image.data());
  poke(file_, end, std::span(image).first(k_header_bytes + 3 * 4096));
  {
    auto& s = reopen();
    EXPECT_FALSE(read_back(s, torn.meta.hash));
    expect_records_read_back(s, {0, 1, 2});
    close();
  }
  // The whole length on disk, but the payload's end never written (zeros): indexed, then refused.
  std::fill(image.begin() + k_header_bytes + 3 * 4096, image.end(), std::byte{0});
  poke(segment_files().at(0), end, image);
  auto& s = reopen();
  EXPECT_FALSE(read_back(s, torn.meta.hash));
  EXPECT_FALSE(s.contains(torn.meta.hash));
}

TEST_F(segment_store_recovery, a_hash_stored_twice_keeps_its_newest_copy_at_open) {
  auto o = options();
  auto older = make(30'000);
  auto newer = older;
  newer.payload = make(45'000).payload;
  write_all(open(o), {older});
  close();
  auto first = segment_files().at(0);

  auto o2 = options();
  o2.dir = dir_ / "other";
  write_all(open(o2), {newer});
  close();
  fs::path second;
  for (auto& e : fs::directory_iterator(o2.dir)) second = e.path();
  fs::copy_file(second, o.dir / "seg-00000000000000ff.kv");

  auto& s = open(o);
  EXPECT_EQ(s.stats().records, 1u);
  expect_reads_back(s, newer);  // the same hash as the older
  // The older copy's segment holds nothing live any more: it is gone.
  EXPECT_FALSE(fs::exists(first));
}

TEST_F(segment_store_recovery, deletes_segments_without_a_valid_record_at_open) {
  auto o = options();
  fs::create_directories(o.dir);
  auto garbage = o.dir / "seg-0000000000000001.kv";
  auto empty = o.dir / "seg-0000000000000002.kv";
  auto other = o.dir / "notes.txt";
  {
    std::ofstream g(garbage, std::ios::binary);
    auto r = make(3 * 4096);
    g.write(reinterpret_cast<const char*>(r.payload.data()), static_cast<std::streamsize>(r.payload.size()));
    std::ofstream e(empty);
    std::ofstream t(other);
    t << "not a segment";
  }
  auto& s = open(o);
  EXPECT_EQ(s.stats().records, 0u);
  EXPECT_EQ(s.stats().segments, 0u);
  EXPECT_FALSE(fs::exists(garbage));
  EXPECT_FALSE(fs::exists(empty));
  EXPECT_TRUE(fs::exists(other));
  write_all(s, {make(1000)});
  EXPECT_EQ(segment_files().at(0).filename(), "seg-0000000000000003.kv");
}

TEST_F(segment_store_recovery, a_segment_s_unused_tail_is_cut_at_close_and_after_a_crash) {
  auto o = options();
  constexpr std::size_t k_payload = 30'000;
  std::vector<record> recs;
  for (int i = 0; i < 3; ++i) recs.push_back(make(k_payload));
  auto& s = open(o);
  write_all(s, recs);
  auto file = segment_files().at(0);
  EXPECT_EQ(s.stats().bytes, fs::file_size(file));  // preallocated or not, what the disk holds
  close();
  EXPECT_EQ(fs::file_size(file), 3 * record_bytes(k_payload));

  // A crash leaves the preallocated zeros after the last record: the next open cuts them.
  fs::resize_file(file, o.segment_bytes);
  auto& again = open(o);
  EXPECT_EQ(fs::file_size(file), 3 * record_bytes(k_payload));
  EXPECT_EQ(again.stats().bytes, 3 * record_bytes(k_payload));
  for (const auto& r : recs) expect_reads_back(again, r);
}

}  // namespace
}  // namespace strata::ssd::testing
