#pragma once
// segment_store::impl: the state behind segment_store and its parts, each in its own file:
//   segment_store.cpp        the public calls, staging slots and the I/O loop (pump, collect)
//   segment_store_scan.cpp   opening: the header scan that rebuilds the index, the warm-up
//   segment_store_write.cpp  the write path, segment rotation, running out of space and resuming
//   segment_store_read.cpp   the read path and the checks a record passes before it is used
//   segment_store_evict.cpp  the disk budget: deleting segments, trimming preallocated tails
// Private to io/ssd: nothing outside these files includes it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "io/ssd/record_format.hpp"
#include "io/ssd/segment_store.hpp"
#include "io/ssd/uring.hpp"

namespace strata::ssd {

/// "seg-<16 hex digits>.kv" for segment `id`.
std::string segment_name(std::uint64_t id);
/// The number in "seg-<16 hex digits>.kv", or nullopt for any other name.
std::optional<std::uint64_t> parse_segment_name(std::string_view name);

struct segment_store::impl {
  using clock = std::chrono::steady_clock;

  /// Payload bytes that may wait in memory for a staging slot. A write() that would pass it is
  /// refused and counted in dropped_writes: the newest record is the one dropped, so that what
  /// already waits (older, and usually a prefix of what follows) still reaches the disk.
  static constexpr std::uint64_t max_queued_bytes = 256ull << 20;
  /// Staging memory for all slots together. Slots grow to the largest record seen; past this
  /// budget fewer of them are mapped, so that large records use fewer I/Os in flight, not more
  /// memory. (One slot may always be mapped, whatever its size.)
  static constexpr std::size_t staging_budget = 64ull << 20;
  /// While degraded, free space is checked at most this often.
  static constexpr auto space_check_interval = std::chrono::seconds(1);
  /// A degraded store writes again once the file system has room for this many of the largest
  /// records seen, plus a margin for its metadata: enough that the next writes do not fail at
  /// once, small enough that a nearly full disk with a few MiB freed is used again.
  static constexpr std::uint64_t resume_records = 4;
  static constexpr std::uint64_t resume_margin = 1ull << 20;

  /// One segment file.
  struct segment {
    std::uint64_t id = 0;
    int fd = -1;
    std::filesystem::path path;
    std::uint64_t bytes = 0;       // end of the last record placed in it
    std::uint64_t file_bytes = 0;  // its size on disk: `bytes`, or more while preallocated
    std::uint64_t last_used = 0;   // LRU clock at its last write or read
    std::uint32_t in_flight = 0;
    std::uint64_t live = 0;        // index entries pointing into it
    std::uint64_t foreign = 0;     // valid records of another model or format version
    std::vector<kv::block_hash> hashes;  // every key (record_key) ever indexed here
    // The offset of the lowest write that failed here. The scan at the next open stops there, so
    // records placed after it are not kept (see finish_write).
    std::uint64_t hole = std::numeric_limits<std::uint64_t>::max();
  };
  using segment_map = std::map<std::uint64_t, segment>;

  /// Where a record lives.
  struct location {
    std::uint64_t segment = 0;
    std::uint64_t offset = 0;
    std::uint64_t payload = 0;
    record_meta meta;
  };

  struct queued_write {
    record_meta meta;
    std::vector<std::byte> payload;
  };

  struct queued_read {
    kv::block_hash hash;
    std::uint64_t tag = 0;
  };

  /// What the I/O in a slot is for.
  struct slot_op {
    enum class kind : std::uint8_t { idle, write, read } what = kind::idle;
    location loc;
    std::uint64_t tag = 0;
    std::uint32_t length = 0;
  };

  /// A record found by the scan.
  struct found_record {
    std::uint64_t offset = 0;
    std::uint64_t payload = 0;
    record_meta meta;
  };

  /// A segment being scanned: one header read in flight at a time.
  struct cursor {
    segment* seg = nullptr;
    std::uint64_t offset = 0;
    std::vector<found_record> found;
  };

  struct scan_counts {
    std::uint64_t other_model = 0;
    std::uint64_t other_version = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t torn = 0;
    std::uint64_t deleted = 0;
  };

  impl(const store_options& o, std::unique_ptr<uring> r);
  ~impl();

  // --- opening (segment_store_scan.cpp) ---------------------------------------------------------

  /// Opens a segment file with O_DIRECT, falling back to buffered I/O (for good) where the file
  /// system refuses it.
  int open_file(const std::filesystem::path& p, int flags);
  /// Finds every segment under the directory, reads their headers and builds the index; cuts torn
  /// tails and deletes segments left with no record.
  result<void> scan(clock::time_point start);
  /// Reads every segment's headers through the ring, one segment per slot, each segment's headers
  /// in order (a header says where the next one is).
  void scan_headers(std::vector<cursor>& cursors, scan_counts& counts);
  /// Takes in one header read by the scan; true when the segment goes on after it.
  bool step(cursor& cur, int res, const std::byte* block, scan_counts& counts);
  /// Maps (and registers) as many staging buffers for records of `bytes` as the budget allows.
  void prepare_slots(std::size_t bytes);
  /// Readies the memory the first restore will use (see the definition).
  void warm_up();
  void warm_slots();

  // --- staging slots and the I/O loop (segment_store.cpp) ----------------------------------------

  /// A free slot whose buffer holds `bytes`, or nullopt while none can be had without passing the
  /// staging budget (or, with nothing in flight, when memory cannot be mapped at all).
  std::optional<unsigned> take_slot(std::size_t bytes);
  void give_slot(unsigned s);
  /// Starts queued reads, then queued writes, while slots are free.
  void pump();
  /// Reaps finished I/O and takes in each.
  void collect();
  /// Makes event_fd() readable when results are waiting that no completion will announce.
  void announce();

  // --- writing (segment_store_write.cpp) ---------------------------------------------------------

  /// The segment the next record of `length` bytes goes to: the current one while it has room,
  /// else a new one. nullptr (errno set) when a new file cannot be created.
  segment* writable_segment(std::uint64_t length);
  /// Starts the oldest queued write; false when it must wait for a slot.
  bool start_write();
  void finish_write(const slot_op& op, int res);
  /// Takes out of the index the records of `seg` placed after its hole, handing them back as
  /// deferred: they read now, but would be lost at the next open.
  void defer_past_hole(segment& seg);
  std::uint64_t resume_bytes() const { return resume_records * largest_record_ + resume_margin; }
  /// A write failed (`res`: -errno, or the bytes of a short write) at `where`: stops writing
  /// until the file system has room again, failing what waits in the queue.
  void degrade(int res, std::uint32_t length, const std::string& where);
  /// A record the store stopped writing: handed back through poll() (completions::deferred).
  void defer(record_meta meta);
  /// While degraded, at most once a second: resumes when statvfs shows enough free space.
  void check_space();

  // --- reading (segment_store_read.cpp) ----------------------------------------------------------

  /// Starts the oldest queued read; false when it must wait for a slot.
  bool start_read();
  /// Why a record read back is not what was written, or nullptr when it is.
  const char* verify(const slot_op& op, int res, const std::byte* buf) const;
  void finish_read(const slot_op& op, int res, const std::byte* buf);

  // --- the disk budget (segment_store_evict.cpp) -------------------------------------------------

  /// Closes and deletes a segment, taking its records out of the index.
  segment_map::iterator drop_segment(segment_map::iterator it);
  /// Deletes segments left with no record, then least recently used ones while past max_bytes.
  /// Never the current segment, never one with I/O in flight.
  void maintain();
  /// Cuts a closed segment's preallocated tail.
  void trim(segment& s);
  /// Removes a record whose read failed, if the index still points at that copy.
  void forget(const location& loc);

  store_options opts_;
  std::unique_ptr<uring> ring_;
  bool direct_ = true;
  std::vector<slot_op> ops_;
  std::vector<unsigned> free_slots_;
  std::vector<io_done> done_;

  segment_map segments_;
  std::optional<std::uint64_t> current_;
  std::uint64_t next_id_ = 1;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t tick_ = 0;
  std::unordered_map<kv::block_hash, location, kv::block_hash_hasher> index_;

  std::deque<queued_write> write_queue_;
  std::deque<queued_read> read_queue_;
  std::unordered_set<kv::block_hash, kv::block_hash_hasher> writing_;
  std::uint64_t queued_bytes_ = 0;
  std::uint64_t largest_record_ = record_bytes(0);

  bool degraded_ = false;
  clock::time_point last_space_check_{};

  store_stats stats_;
  completions out_;
};

}  // namespace strata::ssd
