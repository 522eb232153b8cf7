// segment_store and disk space: the max_bytes budget, and a full disk (ENOSPC) then room again.
#include "io/ssd/segment_store.test.hpp"

#include <fstream>
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
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to loop-mount a small ext4 image";
  auto image = dir_ / "fs.img";
  auto mnt = dir_ / "mnt";
  fs::create_directories(mnt);
  std::string make_fs = "truncate -s 16M " + image.string() + " && mkfs.ext4 -q -F -m 0 " + image.string() +
                        " >/dev/null 2>&1";
  if (std::system(make_fs.c_str()) != 0) GTEST_SKIP() << "mkfs.ext4 is not available";
  std::string mount = "mount -o loop " + image.string() + " " + mnt.string() + " >/dev/null 2>&1";
  if (std::system(mount.c_str()) != 0) GTEST_SKIP() << "mount -o loop does not work here";
  mount_ = mnt;

  auto filler = mnt / "filler";
  {
    std::ofstream f(filler, std::ios::binary);
    auto r = make(4 << 20);
    f.write(reinterpret_cast<const char*>(r.payload.data()), static_cast<std::streamsize>(r.payload.size()));
  }
  ::sync();
  auto o = options();
  o.dir = mnt / "ssd";
  o.segment_bytes = 2 << 20;
  o.queue_depth = 4;
  auto& s = open(o);

  std::vector<record> written;
  std::map<std::string, record> pending;
  collected all;
  for (int i = 0; i < 100 && !s.stats().degraded; ++i) {
    auto r = make(256 << 10);
    if (!s.write(r.meta, r.payload)) break;
    pending[r.meta.hash.hex()] = r;
    EXPECT_EQ(s.flush(clock::now() + 30s), 0u);
    all.add(s.poll());
  }
  ASSERT_TRUE(s.stats().degraded) << "16 MiB filled without ENOSPC";
  EXPECT_FALSE(all.not_written.empty());
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

  fs::remove(filler);
  ::sync();
  std::this_thread::sleep_for(1100ms);  // free space is checked at most once a second
  auto later = make(256 << 10);
  ASSERT_TRUE(s.write(later.meta, later.payload));
  EXPECT_FALSE(s.stats().degraded);
  auto c = drain(s);
  EXPECT_TRUE(c.written.contains(later.meta.hash.hex()));
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
  close();
}

}  // namespace
}  // namespace strata::ssd::testing
