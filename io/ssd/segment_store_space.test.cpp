// segment_store and disk space: the max_bytes budget, and a full disk (ENOSPC) then room again.
#include "io/ssd/segment_store.test.hpp"

#include <thread>

namespace strata::ssd::testing {
namespace {

TEST_F(segment_store_test, past_max_bytes_evicts_the_least_recently_used_whole_segment) {
  auto o = options();
  constexpr std::size_t k_payload = 60'000;
  auto rec = record_bytes(k_payload);
  o.segment_bytes = 4 * rec;
  o.max_bytes = 3 * o.segment_bytes;
  auto& s = open(o);
  std::vector<std::vector<record>> segs(3);
  for (auto& seg : segs) {
    for (int i = 0; i < 4; ++i) seg.push_back(make(k_payload));
    write_all(s, seg);
  }
  EXPECT_EQ(s.stats().segments, 3u);
  EXPECT_EQ(s.stats().evicted_segments, 0u);
  // Reading from the oldest segment makes the second one the least recently used.
  ASSERT_TRUE(read_back(s, segs[0][1].meta.hash));

  for (int i = 0; i < 4; ++i) {
    auto r = make(k_payload);
    ASSERT_TRUE(s.write(r.meta, std::move(r.payload)));
  }
  auto c = drain(s);
  EXPECT_EQ(s.stats().evicted_segments, 1u);
  EXPECT_LE(s.stats().bytes, o.max_bytes);
  for (const auto& r : segs[1]) {
    EXPECT_FALSE(s.contains(r.meta.hash));
    EXPECT_TRUE(c.removed.contains(r.meta.hash.hex()));
  }
  for (int k : {0, 2}) {
    for (const auto& r : segs[k]) {
      auto got = read_back(s, r.meta.hash);
      ASSERT_TRUE(got) << "segment " << k;
      EXPECT_TRUE(*got == r.payload);
    }
  }
  EXPECT_EQ(segment_files().size(), 3u);

  // At open, too: a smaller budget evicts the oldest segments.
  close();
  auto small = o;
  small.max_bytes = o.segment_bytes;
  auto& again = open(small);
  EXPECT_LE(again.stats().bytes, small.max_bytes);
  EXPECT_EQ(segment_files().size(), 1u);
}

TEST_F(segment_store_test, stops_writing_when_the_disk_is_full_and_writes_again_when_space_returns) {
  auto& disk = disk_.emplace(dir_);
  if (!disk.unavailable().empty()) GTEST_SKIP() << disk.unavailable();
  disk.fill(4 << 20);
  auto o = options();
  o.dir = disk.path() / "ssd";
  o.segment_bytes = 2 << 20;
  o.queue_depth = 4;
  auto& s = open(o);

  std::vector<record> written;
  std::map<std::string, record> pending;
  collected all;
  for (int i = 0; i < 100 && !s.degraded(); ++i) {
    auto r = make(256 << 10);
    r.meta.tokens = 31;  // a tail: its token ids come back too
    r.meta.token_ids.assign(31, i);
    if (!s.write(r.meta, r.payload)) break;
    pending[r.meta.hash.hex()] = r;
    EXPECT_EQ(s.flush(clock::now() + 30s), 0u);
    all.add(s.poll());
  }
  ASSERT_TRUE(s.degraded()) << "16 MiB filled without ENOSPC";
  EXPECT_TRUE(s.stats().degraded);
  // The record whose write failed comes back whole, for the caller to offer again later.
  ASSERT_FALSE(all.deferred.empty());
  for (const auto& [hex, meta] : all.deferred) {
    const record& r = pending.at(hex);
    EXPECT_TRUE(meta.parent == r.meta.parent);
    EXPECT_EQ(meta.tokens, r.meta.tokens);
    EXPECT_EQ(meta.token_ids, r.meta.token_ids);
    EXPECT_FALSE(s.contains(r.meta.hash));
  }
  ASSERT_FALSE(all.written.empty());
  for (const auto& h : all.written) written.push_back(pending.at(h));
  auto dropped = s.stats().dropped_writes;
  auto refused = make(256 << 10);
  EXPECT_FALSE(s.write(refused.meta, refused.payload));
  EXPECT_EQ(s.stats().dropped_writes, dropped + 1);
  for (const auto& r : written) {
    auto got = read_back(s, r.meta.hash);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == r.payload);
  }

  // With room again, poll() alone notices it (no write needs to come first), and what was
  // deferred is written when offered again.
  disk.free();
  std::this_thread::sleep_for(1100ms);  // free space is checked at most once a second
  EXPECT_TRUE(s.poll().empty());
  EXPECT_FALSE(s.degraded());
  for (const auto& [hex, meta] : all.deferred) ASSERT_TRUE(s.write(meta, pending.at(hex).payload));
  auto later = make(256 << 10);
  ASSERT_TRUE(s.write(later.meta, later.payload));
  auto c = drain(s);
  EXPECT_TRUE(c.written.contains(later.meta.hash.hex()));
  for (const auto& [hex, meta] : all.deferred) {
    EXPECT_TRUE(c.written.contains(hex));
    auto got = read_back(s, meta.hash);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == pending.at(hex).payload);
  }
  auto got = read_back(s, later.meta.hash);
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got == later.payload);

  // The segment that filled up has a torn tail; a restart still reads what completed.
  auto& again = open(o);
  for (const auto& r : written) {
    auto back = read_back(again, r.meta.hash);
    if (back) {
      EXPECT_TRUE(*back == r.payload);
    }
  }
  EXPECT_TRUE(again.contains(later.meta.hash));
  for (const auto& [hex, meta] : all.deferred) {
    auto catalog = again.catalog();
    auto it = std::find_if(catalog.begin(), catalog.end(), [&](const record_meta& m) { return m.hash == meta.hash; });
    ASSERT_NE(it, catalog.end());
    EXPECT_EQ(it->token_ids, meta.token_ids);
  }
  close();
}

}  // namespace
}  // namespace strata::ssd::testing
