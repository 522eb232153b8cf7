// segment_store: writing and reading back, reopening, refusals, the event fd, buffered I/O.
#include "io/ssd/segment_store.test.hpp"

#include <poll.h>
#include <tuple>

namespace strata::ssd::testing {
namespace {

TEST_F(segment_store_test, reads_back_the_bytes_of_many_records_of_different_sizes) {
  auto& s = open(options());
  std::vector<record> recs;
  for (std::size_t n : {0, 1, 4095, 4096, 4097, 65536, 1 << 20}) recs.push_back(make(n));
  for (int i = 0; i < 60; ++i) recs.push_back(make(rng_() % 300'000));
  write_all(s, recs);
  EXPECT_EQ(s.stats().writes, recs.size());
  EXPECT_EQ(s.stats().records, recs.size());
  EXPECT_GT(s.stats().segments, 1u);  // 4 MiB segments

  std::map<std::uint64_t, const record*> by_tag;
  for (const auto& r : recs) {
    std::uint64_t tag = rng_();
    by_tag[tag] = &r;
    ASSERT_TRUE(s.read(r.meta.hash, tag));
  }
  auto c = drain(s);
  ASSERT_EQ(c.reads.size(), recs.size());
  for (auto& [tag, payload] : c.reads) {
    ASSERT_TRUE(payload) << "tag " << tag;
    EXPECT_TRUE(*payload == by_tag.at(tag)->payload) << "tag " << tag;
  }
  EXPECT_EQ(s.stats().reads, recs.size());
  EXPECT_EQ(s.stats().read_failures, 0u);
}

TEST_F(segment_store_test, reopening_rebuilds_the_same_catalog_and_every_record_still_reads) {
  auto o = options();
  std::vector<record> recs;
  for (int i = 0; i < 40; ++i) recs.push_back(make(50'000 + rng_() % 200'000));
  auto key = [](const record_meta& m) {
    return std::tuple(m.hash.hex(), m.parent.hex(), static_cast<int>(m.format), m.tokens, m.layers);
  };
  std::set<decltype(key(recs[0].meta))> before;
  {
    auto& s = open(o);
    write_all(s, recs);
    for (const auto& m : s.catalog()) before.insert(key(m));
    close();
  }
  auto files = segment_files();
  auto& s = open(o);
  std::set<decltype(key(recs[0].meta))> after;
  for (const auto& m : s.catalog()) after.insert(key(m));
  EXPECT_EQ(after, before);
  EXPECT_EQ(after.size(), recs.size());
  EXPECT_EQ(s.stats().segments, files.size());
  for (const auto& r : recs) {
    auto got = read_back(s, r.meta.hash);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == r.payload);
  }
  // New records go to a new segment, numbered after the others; the old ones are left as they were.
  auto old_size = fs::file_size(files.back());
  write_all(s, {make(10'000)});
  auto now = segment_files();
  ASSERT_EQ(now.size(), files.size() + 1);
  EXPECT_GT(now.back().filename().string(), files.back().filename().string());
  EXPECT_EQ(fs::file_size(files.back()), old_size);
}

TEST_F(segment_store_test, refuses_a_hash_already_stored_or_being_written_and_reads_of_unknown_hashes) {
  auto& s = open(options());
  auto r = make(10'000);
  EXPECT_TRUE(s.write(r.meta, r.payload));
  EXPECT_FALSE(s.write(r.meta, r.payload));  // in flight
  EXPECT_TRUE(drain(s).written.contains(r.meta.hash.hex()));
  EXPECT_TRUE(s.contains(r.meta.hash));
  EXPECT_FALSE(s.write(r.meta, r.payload));  // stored
  EXPECT_FALSE(s.read(random_hash(), 1));
  EXPECT_EQ(s.stats().writes, 1u);
  EXPECT_EQ(s.stats().dropped_writes, 0u);
}

TEST_F(segment_store_test, drops_the_newest_write_when_256_mib_already_wait) {
  auto o = options();
  o.queue_depth = 1;
  o.segment_bytes = 1ull << 30;
  auto& s = open(o);
  std::size_t accepted = 0, refused = 0;
  std::vector<kv::block_hash> hashes;
  for (int i = 0; i < 40; ++i) {
    record_meta m;
    m.hash = random_hash();
    std::vector<std::byte> payload(8 << 20);
    payload[rng_() % payload.size()] = std::byte{1};
    if (s.write(m, std::move(payload))) {
      ++accepted;
      hashes.push_back(m.hash);
    } else {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GE(accepted, 32u);  // 256 MiB waiting, plus the one in flight
  EXPECT_EQ(s.stats().dropped_writes, refused);
  auto c = drain(s);
  EXPECT_EQ(c.written.size(), accepted);
  for (const auto& h : hashes) EXPECT_TRUE(s.contains(h));
}

TEST_F(segment_store_test, the_event_fd_turns_readable_when_io_completes) {
  auto& s = open(options());
  pollfd p{s.event_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  auto r = make(100'000);
  ASSERT_TRUE(s.write(r.meta, r.payload));
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  collected c;
  auto deadline = clock::now() + 10s;
  while (c.written.empty() && clock::now() < deadline) {
    c.add(s.poll());
    ::poll(&p, 1, 100);
  }
  EXPECT_TRUE(c.written.contains(r.meta.hash.hex()));
  EXPECT_EQ(::poll(&p, 1, 0), 0);  // drained

  // A read announces its completion the same way.
  ASSERT_TRUE(s.read(r.meta.hash, 5));
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
}

TEST_F(segment_store_test, works_with_buffered_io_and_on_tmpfs) {
  auto o = options();
  o.direct = false;
  std::vector<record> recs;
  for (int i = 0; i < 20; ++i) recs.push_back(make(rng_() % 100'000));
  auto check = [&](const store_options& opts) {
    auto& s = open(opts);
    write_all(s, recs);
    auto& again = open(opts);
    for (const auto& r : recs) {
      auto got = read_back(again, r.meta.hash);
      ASSERT_TRUE(got);
      EXPECT_TRUE(*got == r.payload);
    }
    close();
  };
  check(o);
  if (fs::is_directory("/dev/shm")) {
    auto shm = options();
    shm.dir = fs::path("/dev/shm") / ("strata-ssd-test-" + std::to_string(seed_) + "-" + std::to_string(::getpid()));
    check(shm);
    fs::remove_all(shm.dir);
  }
}

TEST_F(segment_store_test, closing_with_io_in_flight_waits_for_it_and_keeps_what_completed) {
  auto o = options();
  std::vector<record> recs;
  for (int i = 0; i < 24; ++i) recs.push_back(make(1 << 20));
  {
    auto& s = open(o);
    for (const auto& r : recs) ASSERT_TRUE(s.write(r.meta, r.payload));
    close();  // no flush: the store waits for what is in flight, drops what still waits
  }
  auto& s = open(o);
  EXPECT_GE(s.stats().records, 1u);
  EXPECT_LE(s.stats().records, recs.size());
  for (const auto& r : recs) {
    if (!s.contains(r.meta.hash)) continue;
    auto got = read_back(s, r.meta.hash);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == r.payload);
  }
}

TEST_F(segment_store_test, clear_deletes_every_segment_and_reports_each_record_removed) {
  auto o = options();
  auto& s = open(o);
  std::vector<record> recs;
  for (int i = 0; i < 30; ++i) recs.push_back(make(200'000));
  write_all(s, recs);
  ASSERT_GT(s.stats().segments, 1u);
  EXPECT_EQ(s.clear(), 0u);
  collected c = drain(s);
  EXPECT_EQ(c.removed.size(), recs.size());
  EXPECT_EQ(s.stats().records, 0u);
  EXPECT_EQ(s.stats().bytes, 0u);
  EXPECT_TRUE(segment_files().empty());
  for (const auto& r : recs) EXPECT_FALSE(s.contains(r.meta.hash));
  // The store goes on writing into a fresh segment.
  write_all(s, {recs[0]});
  expect_reads_back(s, recs[0]);
}

}  // namespace
}  // namespace strata::ssd::testing
