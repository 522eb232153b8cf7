// segment_store and snapshot records: a frozen boundary snapshot lives in the same segment files
// as the blocks, keyed apart from the block whose hash it shares, found again at open, and a miss
// when damaged; block records of the previous format version still read.
#include "io/ssd/segment_store.test.hpp"

namespace strata::ssd::testing {
namespace {

class segment_store_snapshot : public segment_store_test {
 protected:
  /// A block record and the snapshot record at its end (same hash, other bytes).
  std::pair<record, record> block_and_snapshot(std::size_t block_bytes, std::size_t snap_bytes) {
    record block = make(block_bytes);
    record snap = make(snap_bytes);
    snap.meta.hash = block.meta.hash;
    snap.meta.kind = record_kind::snapshot;
    return {block, snap};
  }
};

TEST_F(segment_store_snapshot, a_block_and_its_snapshot_are_stored_side_by_side_and_found_again_after_a_reopen) {
  auto o = one_segment_options();
  auto [block, snap] = block_and_snapshot(20'000, 9'000);
  auto& s = open(o);
  write_all(s, {block, snap});
  EXPECT_TRUE(s.contains(block.meta.hash));
  EXPECT_TRUE(s.contains(snapshot_key(block.meta.hash)));
  expect_reads_back(s, block, "the block");
  expect_reads_back(s, snap, "the snapshot");
  // Writing the same snapshot again is refused: it is stored.
  EXPECT_FALSE(s.write(snap.meta, snap.payload));

  auto& again = open(o);
  EXPECT_EQ(again.stats().records, 2u);
  int snapshots = 0;
  for (const auto& m : again.catalog()) {
    EXPECT_TRUE(m.hash == block.meta.hash);
    snapshots += m.kind == record_kind::snapshot;
  }
  EXPECT_EQ(snapshots, 1);
  expect_reads_back(again, block, "the block after a reopen");
  expect_reads_back(again, snap, "the snapshot after a reopen");
}

TEST_F(segment_store_snapshot, a_corrupt_snapshot_is_a_miss_that_leaves_the_index_and_its_block_still_reads) {
  auto o = one_segment_options();
  auto [block, snap] = block_and_snapshot(12'000, 30'000);
  write_all(open(o), {block, snap});
  close();
  // The snapshot is the second record: flip a bit in the middle of its payload.
  const fs::path file = segment_files().at(0);
  flip_bit(file, record_bytes(block.payload.size()) + k_header_bytes + 15'000, 3);

  auto& s = open(o);
  ASSERT_TRUE(s.contains(snapshot_key(block.meta.hash)));  // the header still verifies
  collected seen;
  EXPECT_FALSE(read_back(s, snapshot_key(block.meta.hash), &seen));
  EXPECT_TRUE(seen.removed.contains(snapshot_key(block.meta.hash).hex()));
  EXPECT_FALSE(s.contains(snapshot_key(block.meta.hash)));
  expect_reads_back(s, block, "the block");
}

TEST_F(segment_store_snapshot, a_corrupt_snapshot_header_is_skipped_at_open) {
  auto o = one_segment_options();
  auto [block, snap] = block_and_snapshot(12'000, 30'000);
  auto later = make(8'000);
  write_all(open(o), {block, snap});
  close();
  flip_bit(segment_files().at(0), record_bytes(block.payload.size()) + 40, 0);  // in the snapshot's hash

  auto& s = open(o);
  EXPECT_FALSE(s.contains(snapshot_key(block.meta.hash)));
  expect_reads_back(s, block, "the block");
  write_all(s, {later});
  expect_reads_back(s, later, "a record written after it");
}

TEST_F(segment_store_snapshot, block_records_of_format_version_1_still_read) {
  auto o = one_segment_options();
  auto recs = make_records(3, 10'000);
  write_all(open(o), recs);
  close();
  // Rewrite every header as the version-1 header of the same record (no kind: a block).
  const fs::path file = segment_files().at(0);
  for (std::uint64_t i = 0; i < recs.size(); ++i) {
    auto block = peek(file, i * record_bytes(10'000), k_header_bytes);
    auto h = decode_header(block);
    ASSERT_TRUE(h);
    h->version = 1;
    seal_header(*h, block.data());
    poke(file, i * record_bytes(10'000), std::as_bytes(std::span(&*h, 1)));
  }
  auto& s = open(o);
  EXPECT_EQ(s.stats().records, recs.size());
  for (const auto& r : recs) expect_reads_back(s, r);
}

}  // namespace
}  // namespace strata::ssd::testing
