// ssd_bench: the SSD tier's segment store end to end. Writes N GB of random records, reopens the
// directory (index rebuild from the headers), then reads every record back through the store with
// many reads in flight. Prints its figures; asserts nothing.
//
//   ssd_bench --dir D [--gb N] [--record-kb K] [--queue-depth Q] [--keep]
//
// The last lines are key=value pairs for scripts (bench/ssd_restore.sh).

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "io/ssd/segment_store.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using strata::ssd::segment_store;

struct args {
  std::filesystem::path dir;
  double gb = 1;
  std::size_t record_kb = 1024;
  unsigned queue_depth = 64;
  bool keep = false;
};

bool parse(int argc, char** argv, args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string_view k = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (k == "--keep") {
      a.keep = true;
    } else if ((v = value()) == nullptr) {
      return false;
    } else if (k == "--dir") {
      a.dir = v;
    } else if (k == "--gb") {
      a.gb = std::atof(v);
    } else if (k == "--record-kb") {
      a.record_kb = static_cast<std::size_t>(std::atol(v));
    } else if (k == "--queue-depth") {
      a.queue_depth = static_cast<unsigned>(std::atoi(v));
    } else {
      return false;
    }
  }
  return !a.dir.empty() && a.gb > 0 && a.record_kb > 0 && a.queue_depth > 0;
}

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

/// Waits (at most 100 ms) for the store's eventfd, then collects what finished.
strata::ssd::completions wait_and_poll(segment_store& s) {
  pollfd p{s.event_fd(), POLLIN, 0};
  ::poll(&p, 1, 100);
  return s.poll();
}

void drop_page_cache() {
  if (::geteuid() != 0) return;
  ::sync();
  if (std::FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
    std::fputs("3\n", f);
    std::fclose(f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr, "usage: ssd_bench --dir D [--gb N] [--record-kb K] [--queue-depth Q] [--keep]\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  std::error_code ec;
  std::filesystem::remove_all(a.dir, ec);

  strata::ssd::store_options o;
  o.dir = a.dir;
  o.model = {0x5ca1ab1e, 0xbe7c4};
  o.queue_depth = a.queue_depth;
  o.max_bytes = static_cast<std::uint64_t>((a.gb + 1) * (1ull << 30)) * 2;

  const std::size_t payload_bytes = a.record_kb << 10;
  const auto records = static_cast<std::size_t>(a.gb * (1ull << 30) / static_cast<double>(payload_bytes));
  std::mt19937_64 rng(std::random_device{}());

  // A pool of random payloads; each record gets a copy with its own first 16 bytes.
  std::vector<std::vector<std::byte>> pool(8, std::vector<std::byte>(payload_bytes));
  for (auto& p : pool) {
    for (std::size_t i = 0; i + 8 <= p.size(); i += 8) {
      auto v = rng();
      std::memcpy(p.data() + i, &v, 8);
    }
  }

  std::uint64_t written = 0, not_written = 0;
  {
    auto opened = segment_store::open(o);
    if (!opened) {
      std::fprintf(stderr, "open: %s\n", opened.err().message.c_str());
      return 1;
    }
    auto& s = **opened;
    auto start = clock_type::now();
    std::size_t issued = 0;
    // Keep about two rings' worth in flight or queued: enough to keep the disk busy, far under the
    // store's queue bound.
    const std::size_t window = 2 * a.queue_depth;
    while (issued < records || written + not_written < issued) {
      while (issued < records && issued - written - not_written < window) {
        strata::ssd::record_meta m;
        for (auto& w : m.hash.w) w = rng();
        m.tokens = 32;
        auto payload = pool[issued % pool.size()];
        std::memcpy(payload.data(), &m.hash, std::min<std::size_t>(16, payload.size()));
        if (!s.write(m, std::move(payload))) ++not_written;
        ++issued;
      }
      auto c = wait_and_poll(s);
      written += c.written.size();
      not_written += c.deferred.size();
    }
    double secs = seconds_since(start);
    double gb = static_cast<double>(written * payload_bytes) / 1e9;
    auto st = s.stats();
    std::printf("write: %llu records of %zu KiB (%.2f GB) in %.2f s = %.2f GB/s; %llu not written; %llu segments\n",
                static_cast<unsigned long long>(written), a.record_kb, gb, secs, gb / secs,
                static_cast<unsigned long long>(not_written), static_cast<unsigned long long>(st.segments));
    std::printf("write_gbps=%.3f\n", gb / secs);
  }

  drop_page_cache();
  auto opened = segment_store::open(o);
  if (!opened) {
    std::fprintf(stderr, "reopen: %s\n", opened.err().message.c_str());
    return 1;
  }
  auto& s = **opened;
  auto st = s.stats();
  std::printf("open: %llu records in %llu segments (%.2f GB) indexed in %.3f s\n",
              static_cast<unsigned long long>(st.records), static_cast<unsigned long long>(st.segments),
              static_cast<double>(st.bytes) / 1e9, st.open_seconds);

  auto catalog = s.catalog();
  // Reads every record back through the store; the first pass also sets up its staging buffers.
  auto restore = [&](const char* label) {
    drop_page_cache();
    auto start = clock_type::now();
    std::size_t next = 0, done = 0, in_flight = 0, misses = 0;
    std::uint64_t bytes = 0;
    const std::size_t window = 2 * a.queue_depth;
    while (done < catalog.size()) {
      while (next < catalog.size() && in_flight < window) {
        if (s.read(catalog[next].hash, next)) {
          ++in_flight;
        } else {
          ++misses;
          ++done;
        }
        ++next;
      }
      auto c = wait_and_poll(s);
      for (auto& r : c.reads) {
        --in_flight;
        ++done;
        if (r.payload) {
          bytes += r.payload->size();
        } else {
          ++misses;
        }
      }
    }
    double secs = seconds_since(start);
    double gb = static_cast<double>(bytes) / 1e9;
    std::printf("restore (%s): %zu records (%.2f GB) read and verified in %.3f s = %.2f GB/s; %zu misses\n", label,
                catalog.size() - misses, gb, secs, gb / secs, misses);
    return gb / secs;
  };
  // Three passes, the median reported: a virtual disk's rate swings from run to run (ssd_restore.sh
  // takes fio's median of three runs the same way).
  double passes[3] = {restore("pass 1"), restore("pass 2"), restore("pass 3")};
  std::sort(std::begin(passes), std::end(passes));
  std::printf("restore_gbps=%.3f\n", passes[1]);
  std::printf("open_seconds=%.3f\n", st.open_seconds);
  std::printf("records=%llu\n", static_cast<unsigned long long>(st.records));
  if (!a.keep) std::filesystem::remove_all(a.dir, ec);
  return 0;
}
