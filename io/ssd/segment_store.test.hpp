#pragma once
// The fixture of segment_store's tests (segment_store*.test.cpp): a fresh directory per test,
// records of random bytes from a seed printed when a test fails, and helpers that write, drain
// and read back, and that poke at the segment files.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "io/ssd/record_format.hpp"
#include "io/ssd/segment_store.hpp"
#include "io/ssd/small_disk.test.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::ssd::testing {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

inline constexpr std::array<std::uint64_t, 2> k_model{0x1234'5678'9abc'def0, 0x0fed'cba9'8765'4321};
inline constexpr std::array<std::uint64_t, 2> k_other_model{0x1111, 0x2222};

struct record {
  record_meta meta;
  std::vector<std::byte> payload;
};

/// Every completion of a run of polls, merged.
struct collected {
  std::set<std::string> written, removed;
  std::map<std::string, record_meta> deferred;  // by hash
  std::map<std::uint64_t, std::optional<std::vector<std::byte>>> reads;  // by tag

  void add(completions c) {
    for (auto& h : c.written) written.insert(h.hex());
    for (auto& m : c.deferred) deferred[m.hash.hex()] = std::move(m);
    for (auto& h : c.removed) removed.insert(h.hex());
    for (auto& r : c.reads) reads[r.tag] = std::move(r.payload);
  }
};

class segment_store_test : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test_seed();
    rng_.seed(seed_);
    std::string tmpl = "/tmp/strata-ssd-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    store_.reset();
    disk_.reset();  // after the store: its files must be closed first
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
    EXPECT_TRUE(c.deferred.empty());
  }

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
      auto got = read_back(s, record_key(recs[static_cast<std::size_t>(i)].meta));
      EXPECT_EQ(got.has_value(), i < readable) << "record " << i;
      if (got) {
        EXPECT_TRUE(*got == recs[static_cast<std::size_t>(i)].payload) << "record " << i;
      }
    }
  }

  /// Record `r` reads back from `s` with its own bytes; `what` names it in a failure.
  void expect_reads_back(segment_store& s, const record& r, const std::string& what = "the record") {
    auto got = read_back(s, record_key(r.meta));
    EXPECT_TRUE(got) << what << " does not read back";
    if (got) {
      EXPECT_TRUE(*got == r.payload) << what << " reads back other bytes";
    }
  }

  /// Reads one record back: its payload, or nullopt for a miss (also when read() refuses it).
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
  std::optional<small_disk> disk_;
  std::unique_ptr<segment_store> store_;
};

}  // namespace strata::ssd::testing
