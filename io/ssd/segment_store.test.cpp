#include "io/ssd/segment_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "io/ssd/record_format.hpp"

namespace strata::ssd {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr std::array<std::uint64_t, 2> k_model{0x1234'5678'9abc'def0, 0x0fed'cba9'8765'4321};
constexpr std::array<std::uint64_t, 2> k_other_model{0x1111, 0x2222};

struct record {
  record_meta meta;
  std::vector<std::byte> payload;
};

/// Every completion of a run of polls, merged.
struct collected {
  std::set<std::string> written, not_written, removed;
  std::map<std::uint64_t, std::optional<std::vector<std::byte>>> reads;  // by tag

  void add(completions c) {
    for (auto& h : c.written) written.insert(h.hex());
    for (auto& h : c.not_written) not_written.insert(h.hex());
    for (auto& h : c.removed) removed.insert(h.hex());
    for (auto& r : c.reads) reads[r.tag] = std::move(r.payload);
  }
};

class segment_store_test : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    std::string tmpl = "/tmp/strata-ssd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    store_.reset();
    if (!mount_.empty()) {
      std::string cmd = "umount " + mount_.string();
      if (std::system(cmd.c_str()) != 0) std::cerr << "could not unmount " << mount_ << "\n";
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (HasFailure()) std::cerr << "random seed of this test: " << seed_ << "\n";
  }

  store_options options() {
    store_options o;
    o.dir = dir_ / "ssd";
    o.model = k_model;
    o.max_bytes = 1ull << 30;
    o.segment_bytes = 4ull << 20;
    o.queue_depth = 8;
    return o;
  }

  segment_store& open(const store_options& o) {
    store_.reset();
    auto s = segment_store::open(o);
    EXPECT_TRUE(s) << (s ? "" : s.err().message);
    if (!s) std::abort();
    store_ = std::move(*s);
    return *store_;
  }

  void close() { store_.reset(); }

  kv::block_hash random_hash() {
    kv::block_hash h;
    for (auto& w : h.w) w = rng_();
    return h;
  }

  record make(std::size_t bytes) {
    record r;
    r.meta.hash = random_hash();
    r.meta.parent = random_hash();
    r.meta.format = kv::kv_format::q8_0;
    r.meta.tokens = 32;
    r.meta.layers = static_cast<std::int32_t>(rng_() % 80) + 1;
    r.payload.resize(bytes);
    for (std::size_t i = 0; i < bytes; i += 8) {
      auto v = rng_();
      std::memcpy(r.payload.data() + i, &v, std::min<std::size_t>(8, bytes - i));
    }
    return r;
  }

  /// Waits for everything queued and returns what finished.
  collected drain(segment_store& s) {
    collected c;
    EXPECT_EQ(s.flush(clock::now() + 30s), 0u);
    c.add(s.poll());
    return c;
  }

  /// Writes the records and checks that every one completes.
  void write_all(segment_store& s, const std::vector<record>& recs) {
    for (const auto& r : recs) ASSERT_TRUE(s.write(r.meta, r.payload));
    auto c = drain(s);
    EXPECT_EQ(c.written.size(), recs.size());
    EXPECT_TRUE(c.not_written.empty());
  }

  /// Reads one record back: its payload, or nullopt for a miss (also when read() refuses it).
  /// Options whose segments never fill up in a test: every record lands in one file.
  store_options one_segment_options() {
    auto o = options();
    o.segment_bytes = 1ull << 30;
    return o;
  }
  std::vector<record> make_records(int n, std::size_t payload) {
    std::vector<record> recs;
    for (int i = 0; i < n; ++i) recs.push_back(make(payload));
    return recs;
  }

  /// Of the first n records, exactly the first `readable` read back, each with its own bytes.
  void expect_first_readable(segment_store& s, const std::vector<record>& recs, int n, int readable) {
    for (int i = 0; i < n; ++i) {
      auto got = read_back(s, recs[static_cast<std::size_t>(i)].meta.hash);
      EXPECT_EQ(got.has_value(), i < readable) << "record " << i;
      if (got) EXPECT_TRUE(*got == recs[static_cast<std::size_t>(i)].payload) << "record " << i;
    }
  }

  std::optional<std::vector<std::byte>> read_back(segment_store& s, const kv::block_hash& h, collected* seen = nullptr) {
    std::uint64_t tag = rng_();
    if (!s.read(h, tag)) return std::nullopt;
    auto c = drain(s);
    auto it = c.reads.find(tag);
    EXPECT_NE(it, c.reads.end());
    if (it == c.reads.end()) return std::nullopt;
    auto out = it->second;
    if (seen) *seen = std::move(c);
    return out;
  }

  std::vector<fs::path> segment_files() {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(dir_ / "ssd")) {
      if (e.path().extension() == ".kv") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  static void poke(const fs::path& file, std::uint64_t offset, std::span<const std::byte> bytes) {
    int fd = ::open(file.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }

  static std::vector<std::byte> peek(const fs::path& file, std::uint64_t offset, std::size_t n) {
    std::vector<std::byte> out(n);
    int fd = ::open(file.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), n, static_cast<off_t>(offset)), static_cast<ssize_t>(n));
    ::close(fd);
    return out;
  }

  static void flip_bit(const fs::path& file, std::uint64_t offset, int bit) {
    auto b = peek(file, offset, 1);
    b[0] ^= std::byte(1u << bit);
    poke(file, offset, b);
  }

  unsigned seed_ = 0;
  std::mt19937_64 rng_;
  fs::path dir_;
  fs::path mount_;
  std::unique_ptr<segment_store> store_;
};

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

TEST_F(segment_store_test, skips_records_of_another_model_at_open_and_keeps_them_on_disk) {
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
  for (const auto& r : mine) {
    auto got = read_back(again, r.meta.hash);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == r.payload);
  }
}

TEST_F(segment_store_test, skips_a_record_of_another_format_version_and_reads_the_ones_after_it) {
  auto o = options();
  std::vector<record> recs;
  for (int i = 0; i < 6; ++i) recs.push_back(make(30'000));
  write_all(open(o), recs);
  close();
  // Rewrite record 2's header as a valid header of format version 2.
  auto file = segment_files().at(0);
  std::uint64_t at = 2 * record_bytes(30'000);
  auto block = peek(file, at, k_header_bytes);
  auto h = decode_header(block);
  ASSERT_TRUE(h);
  h->version = 2;
  seal_header(*h, block.data());
  poke(file, at, std::as_bytes(std::span(&*h, 1)));

  auto& s = open(o);
  EXPECT_EQ(s.stats().records, recs.size() - 1);
  EXPECT_FALSE(s.contains(recs[2].meta.hash));
  for (int i : {0, 1, 3, 4, 5}) {
    auto got = read_back(s, recs[i].meta.hash);
    ASSERT_TRUE(got) << "record " << i;
    EXPECT_TRUE(*got == recs[i].payload);
  }
}

TEST_F(segment_store_test, a_segment_truncated_mid_payload_or_mid_header_loses_only_its_tail) {
  auto o = one_segment_options();
  constexpr std::size_t k_payload = 40'000;
  auto recs = make_records(6, k_payload);
  write_all(open(o), recs);
  close();
  auto file = segment_files().at(0);
  auto step = record_bytes(k_payload);

  fs::resize_file(file, 4 * step + k_header_bytes + 100);  // in record 4's payload
  {
    auto& s = open(o);
    EXPECT_EQ(s.stats().records, 4u);
    expect_first_readable(s, recs, 6, 4);
    close();
  }
  fs::resize_file(segment_files().at(0), 2 * step + 1000);  // in record 2's header
  auto& s = open(o);
  EXPECT_EQ(s.stats().records, 2u);
  expect_first_readable(s, recs, 6, 2);
}

TEST_F(segment_store_test, a_flipped_payload_bit_is_a_miss_that_leaves_the_index) {
  auto o = one_segment_options();
  constexpr std::size_t k_payload = 100'000;
  auto recs = make_records(5, k_payload);
  auto& s = open(o);
  write_all(s, recs);
  auto file = segment_files().at(0);
  flip_bit(file, 3 * record_bytes(k_payload) + k_header_bytes + rng_() % k_payload, static_cast<int>(rng_() % 8));

  collected seen;
  EXPECT_FALSE(read_back(s, recs[3].meta.hash, &seen));
  EXPECT_TRUE(seen.removed.contains(recs[3].meta.hash.hex()));
  EXPECT_FALSE(s.contains(recs[3].meta.hash));
  EXPECT_EQ(s.stats().read_failures, 1u);
  EXPECT_EQ(s.stats().records, recs.size() - 1);
  EXPECT_FALSE(s.read(recs[3].meta.hash, 7));  // no longer indexed
  for (int i : {0, 1, 2, 4}) {
    auto got = read_back(s, recs[i].meta.hash);
    ASSERT_TRUE(got) << "record " << i;
    EXPECT_TRUE(*got == recs[i].payload);
  }
  // After a restart the header still scans; the read fails again, never handing out the bytes.
  auto& again = open(o);
  EXPECT_FALSE(read_back(again, recs[3].meta.hash));
  EXPECT_EQ(again.stats().read_failures, 1u);
}

TEST_F(segment_store_test, a_flipped_header_bit_is_skipped_at_open) {
  auto o = one_segment_options();
  constexpr std::size_t k_payload = 20'000;
  auto recs = make_records(5, k_payload);
  write_all(open(o), recs);
  close();
  flip_bit(segment_files().at(0), 3 * record_bytes(k_payload) + rng_() % sizeof(record_header),
           static_cast<int>(rng_() % 8));
  auto& s = open(o);
  EXPECT_EQ(s.stats().records, 3u);  // the scan cannot trust anything after a bad header
  expect_first_readable(s, recs, 5, 3);
}

TEST_F(segment_store_test, a_zeroed_region_is_a_miss) {
  auto o = one_segment_options();
  constexpr std::size_t k_payload = 50'000;
  auto recs = make_records(5, k_payload);
  auto& s = open(o);
  write_all(s, recs);
  auto file = segment_files().at(0);
  std::vector<std::byte> zeros(8192);
  poke(file, 1 * record_bytes(k_payload) + k_header_bytes + 4096, zeros);  // inside record 1's payload
  EXPECT_FALSE(read_back(s, recs[1].meta.hash));
  EXPECT_FALSE(s.contains(recs[1].meta.hash));

  poke(file, 3 * record_bytes(k_payload), zeros);  // record 3's header and the start of its payload
  auto& again = open(o);
  EXPECT_FALSE(again.contains(recs[3].meta.hash));
  EXPECT_FALSE(read_back(again, recs[1].meta.hash));
  for (int i : {0, 2}) {
    auto got = read_back(again, recs[i].meta.hash);
    ASSERT_TRUE(got) << "record " << i;
    EXPECT_TRUE(*got == recs[i].payload);
  }
}

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

TEST_F(segment_store_test, a_record_cut_off_the_file_after_indexing_reads_as_a_miss) {
  auto o = one_segment_options();
  constexpr std::size_t k_payload = 70'000;
  auto recs = make_records(4, k_payload);
  auto& s = open(o);
  write_all(s, recs);
  fs::resize_file(segment_files().at(0), 3 * record_bytes(k_payload) + k_header_bytes + 4096);
  collected seen;
  EXPECT_FALSE(read_back(s, recs[3].meta.hash, &seen));
  EXPECT_TRUE(seen.removed.contains(recs[3].meta.hash.hex()));
  EXPECT_EQ(s.stats().read_failures, 1u);
  auto got = read_back(s, recs[2].meta.hash);
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got == recs[2].payload);
}

TEST_F(segment_store_test, a_torn_final_write_never_reads_back_wrong_bytes) {
  auto o = one_segment_options();
  constexpr std::size_t k_payload = 90'000;
  auto recs = make_records(3, k_payload);
  write_all(open(o), recs);
  close();
  auto file = segment_files().at(0);
  auto end = fs::file_size(file);

  // A valid header followed by only part of its payload, as a crash mid-write leaves it.
  auto torn = make(k_payload);
  std::vector<std::byte> image(record_bytes(k_payload));
  encode_record(torn.meta, k_model, torn.payload, image.data());
  poke(file, end, std::span(image).first(k_header_bytes + 3 * 4096));
  {
    auto& s = open(o);
    EXPECT_FALSE(read_back(s, torn.meta.hash));
    for (const auto& r : recs) {
      auto got = read_back(s, r.meta.hash);
      ASSERT_TRUE(got);
      EXPECT_TRUE(*got == r.payload);
    }
    close();
  }
  // The whole length on disk, but the payload's end never written (zeros): indexed, then refused.
  auto file2 = segment_files().at(0);
  std::fill(image.begin() + k_header_bytes + 3 * 4096, image.end(), std::byte{0});
  poke(file2, end, image);
  auto& s = open(o);
  EXPECT_FALSE(read_back(s, torn.meta.hash));
  EXPECT_FALSE(s.contains(torn.meta.hash));
}

TEST_F(segment_store_test, a_hash_stored_twice_keeps_its_newest_copy_at_open) {
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
  auto got = read_back(s, older.meta.hash);
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got == newer.payload);
  // The older copy's segment holds nothing live any more: it is gone.
  EXPECT_FALSE(fs::exists(first));
}

TEST_F(segment_store_test, deletes_segments_without_a_valid_record_at_open) {
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

TEST_F(segment_store_test, a_segment_s_unused_tail_is_cut_at_close_and_after_a_crash) {
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
  for (const auto& r : recs) {
    auto got = read_back(again, r.meta.hash);
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == r.payload);
  }
}

TEST(record_format, a_header_is_128_bytes_whose_checksum_catches_every_flipped_bit) {
  std::mt19937_64 rng(std::random_device{}());
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
  std::mt19937_64 rng(std::random_device{}());
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

}  // namespace
}  // namespace strata::ssd
