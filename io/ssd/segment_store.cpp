#include "io/ssd/segment_store.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io/ssd/record_format.hpp"
#include "io/ssd/uring.hpp"
#include "src/common/block_buffers.hpp"

namespace strata::ssd {
namespace {

using clock = std::chrono::steady_clock;

/// Payload bytes that may wait in memory for a staging slot. A write() that would pass it is
/// refused and counted in dropped_writes: the newest record is the one dropped, so that what
/// already waits (older, and usually a prefix of what follows) still reaches the disk.
constexpr std::uint64_t k_max_queued_bytes = 256ull << 20;
/// Staging memory for all slots together. Slots grow to the largest record seen; past this budget
/// fewer of them are mapped, so that large records use fewer I/Os in flight, not more memory.
/// (One slot may always be mapped, whatever its size.)
constexpr std::size_t k_staging_budget = 64ull << 20;
/// While degraded, free space is checked at most this often.
constexpr auto k_space_check_interval = std::chrono::seconds(1);
/// A degraded store writes again once the file system has room for this many of the largest
/// records seen, plus a margin for its metadata: enough that the next writes do not fail at once,
/// small enough that a nearly full disk with a few MiB freed is used again.
constexpr std::uint64_t k_resume_records = 4;
constexpr std::uint64_t k_resume_margin = 1ull << 20;

std::string segment_name(std::uint64_t id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "seg-0000000000000000.kv";
  for (int i = 0; i < 16; ++i) s[4 + 15 - i] = digits[(id >> (4 * i)) & 15];
  return s;
}

/// The number in "seg-<16 hex digits>.kv", or nullopt for any other name.
std::optional<std::uint64_t> parse_segment_name(std::string_view name) {
  if (name.size() != 23 || !name.starts_with("seg-") || !name.ends_with(".kv")) return std::nullopt;
  std::uint64_t id = 0;
  auto digits = name.substr(4, 16);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id, 16);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return id;
}

std::string short_hex(const kv::block_hash& h) { return h.hex().substr(0, 16); }

/// A payload copied out of its staging buffer into a block buffer the caller owns (and the
/// pipeline gives back once the block is in its pages).
std::vector<std::byte> copy_out(const std::byte* p, std::size_t n) { return block_buffers::shared().copy(p, n); }

}  // namespace

struct segment_store::impl {
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
    std::vector<kv::block_hash> hashes;  // every hash ever indexed here
  };

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

  impl(const store_options& o, std::unique_ptr<uring> r)
      : opts_(o), ring_(std::move(r)), direct_(o.direct), ops_(ring_->slots()) {
    for (unsigned s = ring_->slots(); s-- > 0;) free_slots_.push_back(s);
  }

  ~impl() {
    if (!write_queue_.empty()) {
      spdlog::warn("ssd: closing with {} records never written (no flush before)", write_queue_.size());
    }
    // The ring's destructor waits for the I/O in flight; the files must stay open until then.
    ring_.reset();
    current_.reset();
    for (auto& [id, s] : segments_) {
      trim(s);
      ::close(s.fd);
    }
  }

  // --- opening ---------------------------------------------------------------------------------

  int open_file(const std::filesystem::path& p, int flags) {
    if (direct_) {
      int fd = ::open(p.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644);
      if (fd >= 0 || errno != EINVAL) return fd;
      direct_ = false;
      spdlog::info("ssd: {} does not take O_DIRECT; using buffered I/O", opts_.dir.string());
      flags &= ~O_EXCL;  // the refused open may have created the file
    }
    int fd = ::open(p.c_str(), flags | O_CLOEXEC, 0644);
    // Buffered scans read one header per record: no read-ahead of the payloads in between.
    if (fd >= 0 && (flags & O_ACCMODE) == O_RDONLY) ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    return fd;
  }

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

  result<void> scan(clock::time_point start) {
    std::error_code ec;
    std::vector<std::uint64_t> ids;
    for (std::filesystem::directory_iterator it(opts_.dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (auto id = parse_segment_name(it->path().filename().string())) ids.push_back(*id);
    }
    if (ec) return fail(errc::io_error, "cannot read ", opts_.dir.string(), ": ", ec.message());
    std::sort(ids.begin(), ids.end());

    std::vector<cursor> cursors;
    for (auto id : ids) {
      next_id_ = std::max(next_id_, id + 1);
      auto path = opts_.dir / segment_name(id);
      int fd = open_file(path, O_RDONLY);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0) {
        spdlog::warn("ssd: cannot open {} ({}); leaving it alone", path.string(), std::strerror(errno));
        if (fd >= 0) ::close(fd);
        continue;
      }
      auto& s = segments_[id];
      s.id = id;
      s.fd = fd;
      s.path = std::move(path);
      s.bytes = s.file_bytes = static_cast<std::uint64_t>(st.st_size);
      cursors.push_back({&s, 0, {}});
    }

    scan_counts counts;
    scan_headers(cursors, counts);
    // Cut what follows the last valid record: a torn write, or the preallocated tail of a segment
    // that was being written when the process stopped. Nothing will ever be appended there.
    for (auto& c : cursors) {
      if (c.offset < c.seg->bytes && ::truncate(c.seg->path.c_str(), static_cast<off_t>(c.offset)) == 0) {
        c.seg->bytes = c.seg->file_bytes = c.offset;
      }
    }

    // Index in write order, so that a hash stored twice keeps its newest copy.
    for (auto& c : cursors) {
      for (auto& f : c.found) {
        auto [it, fresh] = index_.try_emplace(f.meta.hash);
        if (!fresh) {
          ++counts.duplicates;
          --segments_.at(it->second.segment).live;
        }
        it->second = location{c.seg->id, f.offset, f.payload, f.meta};
        ++c.seg->live;
        c.seg->hashes.push_back(f.meta.hash);
      }
    }
    for (auto it = segments_.begin(); it != segments_.end();) {
      auto& s = it->second;
      total_bytes_ += s.file_bytes;
      s.last_used = ++tick_;
      if (s.live == 0 && s.foreign == 0) {
        ++counts.deleted;
        it = drop_segment(it);
      } else {
        ++it;
      }
    }
    maintain();
    out_ = {};  // nobody has seen these records yet: there is nothing to take back

    spdlog::info(
        "ssd: {} records in {} segments ({:.2f} GiB) under {}; skipped {} of another model, {} of another format "
        "version, {} older duplicates; {} torn tails; {} segments left with no record deleted; {:.2f} s",
        index_.size(), segments_.size(), static_cast<double>(total_bytes_) / (1ull << 30), opts_.dir.string(),
        counts.other_model, counts.other_version, counts.duplicates, counts.torn, counts.deleted,
        std::chrono::duration<double>(clock::now() - start).count());
    return {};
  }

  /// Reads every segment's headers through the ring, one segment per slot, each segment's headers
  /// in order (a header says where the next one is).
  void scan_headers(std::vector<cursor>& cursors, scan_counts& counts) {
    std::vector<std::size_t> slot_cursor(ring_->slots());
    std::size_t next = 0;
    // Issues the read of cursor c's next header into slot; false when the segment is done.
    auto issue = [&](std::size_t c, unsigned slot) {
      auto& cur = cursors[c];
      if (cur.offset + k_header_bytes > cur.seg->bytes) {
        if (cur.offset != cur.seg->bytes) ++counts.torn;  // less than a header at the end
        return false;
      }
      slot_cursor[slot] = c;
      ring_->prepare(read_op{cur.seg->fd, cur.offset, static_cast<std::uint32_t>(k_header_bytes), slot});
      return true;
    };
    std::vector<unsigned> idle;
    for (unsigned s = 0; s < ring_->slots(); ++s) {
      if (ring_->reserve(s, k_header_bytes)) idle.push_back(s);
    }
    std::vector<io_done> done;
    for (;;) {
      while (!idle.empty() && next < cursors.size()) {
        if (issue(next++, idle.back())) idle.pop_back();
      }
      ring_->submit();
      if (ring_->in_flight() == 0) break;
      ring_->wait(clock::now() + std::chrono::seconds(1));
      done.clear();
      ring_->reap(done);
      for (auto d : done) {
        auto& cur = cursors[slot_cursor[d.slot]];
        if (step(cur, d.res, ring_->buffer(d.slot), counts) && issue(slot_cursor[d.slot], d.slot)) continue;
        idle.push_back(d.slot);
      }
    }
  }

  /// Takes in one header read by the scan; true when the segment goes on after it.
  bool step(cursor& cur, int res, const std::byte* block, scan_counts& counts) {
    auto& seg = *cur.seg;
    if (res != static_cast<int>(k_header_bytes)) {
      spdlog::warn("ssd: reading the header at offset {} of {} failed ({}); ignoring the rest of it", cur.offset,
                   seg.path.string(), res < 0 ? std::strerror(-res) : "short read");
      ++counts.torn;
      return false;
    }
    auto h = decode_header(std::span(block, k_header_bytes));
    std::uint64_t length = h ? record_bytes(h->payload_bytes) : 0;
    if (!h || cur.offset + length > seg.bytes) {
      ++counts.torn;  // a torn, zeroed or overwritten record: nothing after it can be trusted
      return false;
    }
    if (h->version != k_format_version) {
      ++counts.other_version;
      ++seg.foreign;
    } else if (h->model != opts_.model) {
      ++counts.other_model;
      ++seg.foreign;
    } else {
      cur.found.push_back({cur.offset, h->payload_bytes, meta_of(*h, std::span(block, k_header_bytes))});
    }
    cur.offset += length;
    return true;
  }

  // --- slots and segments ----------------------------------------------------------------------

  /// A free slot whose buffer holds `bytes`, or nullopt while none can be had without passing the
  /// staging budget (or, with nothing in flight, when memory cannot be mapped at all).
  std::optional<unsigned> take_slot(std::size_t bytes) {
    if (free_slots_.empty()) return std::nullopt;
    for (std::size_t i = free_slots_.size(); i-- > 0;) {
      unsigned s = free_slots_[i];
      if (ring_->capacity(s) >= bytes) {
        free_slots_[i] = free_slots_.back();
        free_slots_.pop_back();
        return s;
      }
    }
    unsigned s = free_slots_.back();
    if (ring_->in_flight() > 0 && ring_->mapped_bytes() - ring_->capacity(s) + bytes > k_staging_budget) {
      return std::nullopt;
    }
    if (!ring_->reserve(s, bytes)) return std::nullopt;
    free_slots_.pop_back();
    return s;
  }

  /// Maps (and registers) as many staging buffers for records of `bytes` as the budget allows.
  void prepare_slots(std::size_t bytes) {
    std::size_t mapped = 0;
    for (unsigned s : free_slots_) {
      if (mapped + bytes > k_staging_budget) break;
      if (!ring_->reserve(s, bytes)) break;
      mapped += ring_->capacity(s);
    }
  }

  /// When there are records to restore, readies the memory the first restore will use, so that it
  /// costs what later ones do:
  ///  - a read from the largest segment into every staging buffer, and one pass over each. On a
  ///    virtual machine the first device read into a page makes the next CPU pass over it several
  ///    times slower than later ones (1 GB/s against 16 for a 384 KiB record here, as the host
  ///    maps the page for the device). Only with O_DIRECT: buffered reads hand no page to the device;
  ///  - block buffers for the payloads (block_buffers), as many as the records, up to its limit.
  void warm_up() {
    if (index_.empty()) return;
    const auto start = clock::now();
    std::uint64_t payload = 0;
    for (const auto& [hash, loc] : index_) payload = std::max(payload, loc.payload);
    const std::size_t buffers = block_buffers::shared().prefill(payload, index_.size());
    warm_slots();
    spdlog::info("ssd: staging and {} payload buffers ({} MiB) readied in {:.2f} s", buffers, (buffers * payload) >> 20,
                 std::chrono::duration<double>(clock::now() - start).count());
  }

  void warm_slots() {
    if (!direct_ || segments_.empty()) return;
    const auto largest = std::max_element(segments_.begin(), segments_.end(),
                                          [](const auto& a, const auto& b) { return a.second.bytes < b.second.bytes; });
    const segment& seg = largest->second;
    std::uint64_t sink = 0;
    for (unsigned s = 0; s < ring_->slots(); ++s) {
      const std::size_t n = std::min<std::uint64_t>(ring_->capacity(s), seg.bytes) / 4096 * 4096;
      if (n == 0 || ring_->busy(s)) continue;
      if (::pread(seg.fd, ring_->buffer(s), n, 0) != static_cast<ssize_t>(n)) return;
      sink += XXH3_64bits(ring_->buffer(s), n);
    }
    if (sink == 1) spdlog::trace("ssd: staging warm-up sum {}", sink);  // keeps the reads
  }

  void give_slot(unsigned s) {
    ops_[s] = {};
    free_slots_.push_back(s);
  }

  /// The segment the next record of `length` bytes goes to: the current one while it has room, else a
  /// new one. nullptr (errno set) when a new file cannot be created.
  segment* writable_segment(std::uint64_t length) {
    if (current_) {
      auto& s = segments_.at(*current_);
      if (s.bytes == 0 || s.bytes + length <= opts_.segment_bytes) return &s;
    }
    std::uint64_t id = next_id_++;
    auto path = opts_.dir / segment_name(id);
    int fd = open_file(path, O_RDWR | O_CREAT | O_EXCL);
    if (fd < 0) return nullptr;
    auto& s = segments_[id];
    s.id = id;
    s.fd = fd;
    s.path = std::move(path);
    s.last_used = ++tick_;
    current_ = id;
    // Allocating the whole segment up front makes each O_DIRECT write an overwrite inside the
    // file rather than an append, which the file system runs in parallel instead of one at a time
    // (3x the write rate for 64 KiB records on ext4). The unused tail is cut when the segment is
    // closed. Without room for it, records are appended as they come.
    if (direct_) {
      if (::fallocate(fd, 0, 0, static_cast<off_t>(opts_.segment_bytes)) == 0) {
        s.file_bytes = opts_.segment_bytes;
        total_bytes_ += s.file_bytes;
      } else {
        [[maybe_unused]] int rc = ::ftruncate(fd, 0);  // drop whatever a failed fallocate left
      }
    }
    return &s;
  }

  std::map<std::uint64_t, segment>::iterator drop_segment(std::map<std::uint64_t, segment>::iterator it) {
    auto& s = it->second;
    for (auto& h : s.hashes) {
      auto found = index_.find(h);
      if (found != index_.end() && found->second.segment == s.id) {
        index_.erase(found);
        out_.removed.push_back(h);
      }
    }
    ::close(s.fd);
    if (::unlink(s.path.c_str()) != 0 && errno != ENOENT) {
      spdlog::warn("ssd: cannot delete {} ({})", s.path.string(), std::strerror(errno));
    }
    total_bytes_ -= s.file_bytes;
    if (current_ == s.id) current_.reset();
    return segments_.erase(it);
  }

  /// Deletes segments left with no record, then least recently used ones while past max_bytes.
  /// Never the current segment, never one with I/O in flight.
  void maintain() {
    auto idle = [this](const segment& s) { return s.in_flight == 0 && current_ != s.id; };
    for (auto it = segments_.begin(); it != segments_.end();) {
      auto& s = it->second;
      if (idle(s) && s.live == 0 && s.foreign == 0) {
        it = drop_segment(it);
        continue;
      }
      if (idle(s)) trim(s);
      ++it;
    }
    while (total_bytes_ > opts_.max_bytes) {
      auto victim = segments_.end();
      for (auto it = segments_.begin(); it != segments_.end(); ++it) {
        if (idle(it->second) && (victim == segments_.end() || it->second.last_used < victim->second.last_used)) {
          victim = it;
        }
      }
      if (victim == segments_.end()) break;
      spdlog::debug("ssd: evicting {} ({} records, {} MiB)", victim->second.path.string(), victim->second.live,
                    victim->second.bytes >> 20);
      ++stats_.evicted_segments;
      drop_segment(victim);
    }
  }

  /// Cuts a closed segment's preallocated tail.
  void trim(segment& s) {
    if (s.file_bytes <= s.bytes || ::ftruncate(s.fd, static_cast<off_t>(s.bytes)) != 0) return;
    total_bytes_ -= s.file_bytes - s.bytes;
    s.file_bytes = s.bytes;
  }

  /// Removes a record whose read failed, if the index still points at that copy.
  void forget(const location& loc) {
    auto it = index_.find(loc.meta.hash);
    if (it == index_.end() || it->second.segment != loc.segment || it->second.offset != loc.offset) return;
    index_.erase(it);
    --segments_.at(loc.segment).live;
    out_.removed.push_back(loc.meta.hash);
  }

  // --- running out of space --------------------------------------------------------------------

  std::uint64_t resume_bytes() const { return k_resume_records * largest_record_ + k_resume_margin; }

  /// A write failed (`res`: -errno, or the bytes of a short write) at `where`: stops writing
  /// until the file system has room again, failing what waits in the queue.
  void degrade(int res, std::uint32_t length, const std::string& where) {
    // The failed record left a hole or a torn tail: later records go to a new segment.
    current_.reset();
    for (auto& w : write_queue_) {
      writing_.erase(w.meta.hash);
      out_.not_written.push_back(w.meta.hash);
      ++stats_.dropped_writes;
    }
    write_queue_.clear();
    queued_bytes_ = 0;
    if (degraded_) return;
    degraded_ = true;
    last_space_check_ = clock::now();
    std::string why = res < 0 ? std::strerror(-res) : fmt::format("wrote {} of {} bytes", res, length);
    spdlog::warn("ssd: {} failed ({}); the SSD tier stops writing until {} MiB are free", where, why,
                 resume_bytes() >> 20);
  }

  /// While degraded, at most once a second: resumes when statvfs shows enough free space.
  void check_space() {
    if (!degraded_) return;
    auto now = clock::now();
    if (now - last_space_check_ < k_space_check_interval) return;
    last_space_check_ = now;
    struct statvfs v {};
    if (::statvfs(opts_.dir.c_str(), &v) != 0) return;
    std::uint64_t free_bytes = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
    if (free_bytes < resume_bytes()) return;
    degraded_ = false;
    spdlog::info("ssd: {} MiB free under {}; the SSD tier writes again", free_bytes >> 20, opts_.dir.string());
  }

  // --- I/O -------------------------------------------------------------------------------------

  /// Starts queued reads, then queued writes, while slots are free.
  void pump() {
    for (;;) {
      if (!read_queue_.empty()) {
        if (!start_read()) break;
      } else if (!write_queue_.empty() && !degraded_) {
        if (!start_write()) break;
      } else {
        break;
      }
    }
    ring_->submit();
  }

  /// Starts the oldest queued read; false when it must wait for a slot.
  bool start_read() {
    auto r = read_queue_.front();
    auto it = index_.find(r.hash);
    if (it == index_.end()) {  // evicted or found corrupt since it was queued
      read_queue_.pop_front();
      out_.reads.push_back({r.tag, r.hash, std::nullopt});
      return true;
    }
    auto loc = it->second;
    auto length = record_bytes(loc.payload);
    auto slot = take_slot(length);
    if (!slot) {
      if (ring_->in_flight() > 0) return false;
      read_queue_.pop_front();  // no memory for a staging buffer: a miss, the record stays
      out_.reads.push_back({r.tag, r.hash, std::nullopt});
      return true;
    }
    read_queue_.pop_front();
    auto& seg = segments_.at(loc.segment);
    ++seg.in_flight;
    seg.last_used = ++tick_;
    ops_[*slot] = {slot_op::kind::read, loc, r.tag, static_cast<std::uint32_t>(length)};
    ring_->prepare(read_op{seg.fd, loc.offset, static_cast<std::uint32_t>(length), *slot});
    return true;
  }

  /// Starts the oldest queued write; false when it must wait for a slot.
  bool start_write() {
    auto& w = write_queue_.front();
    auto length = record_bytes(w.payload.size());
    auto slot = take_slot(length);
    if (!slot && ring_->in_flight() > 0) return false;
    segment* seg = slot ? writable_segment(length) : nullptr;
    if (!seg) {
      int err = slot ? errno : ENOMEM;
      auto hash = w.meta.hash;
      if (slot) give_slot(*slot);
      writing_.erase(hash);
      queued_bytes_ -= w.payload.size();
      write_queue_.pop_front();
      out_.not_written.push_back(hash);
      ++stats_.dropped_writes;
      degrade(-err, static_cast<std::uint32_t>(length),
              slot ? "creating a segment under " + opts_.dir.string() : std::string("mapping a staging buffer"));
      return true;
    }
    encode_record(w.meta, opts_.model, w.payload, ring_->buffer(*slot));
    const std::size_t payload_bytes = w.payload.size();
    block_buffers::shared().give(std::move(w.payload));  // in the staging buffer now
    location loc{seg->id, seg->bytes, payload_bytes, w.meta};
    ops_[*slot] = {slot_op::kind::write, loc, 0, static_cast<std::uint32_t>(length)};
    ring_->prepare(write_op{seg->fd, seg->bytes, static_cast<std::uint32_t>(length), *slot});
    seg->bytes += length;
    if (seg->bytes > seg->file_bytes) {
      total_bytes_ += seg->bytes - seg->file_bytes;
      seg->file_bytes = seg->bytes;
    }
    ++seg->in_flight;
    largest_record_ = std::max(largest_record_, length);
    queued_bytes_ -= payload_bytes;
    write_queue_.pop_front();
    return true;
  }

  /// Reaps finished I/O and takes in each.
  void collect() {
    done_.clear();
    ring_->reap(done_);
    for (auto d : done_) {
      auto op = ops_[d.slot];
      if (op.what == slot_op::kind::write) {
        finish_write(op, d.res);
      } else if (op.what == slot_op::kind::read) {
        finish_read(op, d.res, ring_->buffer(d.slot));
      }
      give_slot(d.slot);
      // The freed slot goes straight back to the disk, before the next completion is copied
      // out: copying a batch of completions first would leave the disk idle meanwhile.
      pump();
    }
  }

  void finish_write(const slot_op& op, int res) {
    const auto& hash = op.loc.meta.hash;
    writing_.erase(hash);
    auto& seg = segments_.at(op.loc.segment);
    --seg.in_flight;
    if (res != static_cast<int>(op.length)) {
      out_.not_written.push_back(hash);
      ++stats_.dropped_writes;
      degrade(res, op.length, fmt::format("writing at offset {} of {}", op.loc.offset, seg.path.string()));
      maintain();
      return;
    }
    index_[hash] = op.loc;
    ++seg.live;
    seg.hashes.push_back(hash);
    seg.last_used = ++tick_;
    ++stats_.writes;
    stats_.write_bytes += op.loc.payload;
    out_.written.push_back(hash);
    maintain();
  }

  /// Why a record read back is not what was written, or nullptr when it is.
  const char* verify(const slot_op& op, int res, const std::byte* buf) const {
    if (res < 0) return std::strerror(-res);
    if (res != static_cast<int>(op.length)) return "short read";
    header_fault fault{};
    auto h = decode_header(std::span(buf, k_header_bytes), &fault);
    if (!h) return fault == header_fault::bad_checksum ? "header checksum mismatch" : "no valid header";
    if (h->version != k_format_version || h->model != opts_.model) return "another record's header";
    if (h->hash != op.loc.meta.hash.w) return "another block's header";
    if (h->payload_bytes != op.loc.payload) return "payload length changed";
    if (payload_checksum(std::span(buf + k_header_bytes, op.loc.payload)) != h->payload_xxh3) {
      return "payload checksum mismatch";
    }
    return nullptr;
  }

  void finish_read(const slot_op& op, int res, const std::byte* buf) {
    auto& seg = segments_.at(op.loc.segment);
    --seg.in_flight;
    const auto& hash = op.loc.meta.hash;
    if (const char* why = verify(op, res, buf)) {
      ++stats_.read_failures;
      spdlog::warn("ssd: record {} at offset {} of {} is unreadable ({}); dropping it", short_hex(hash), op.loc.offset,
                   seg.path.string(), why);
      forget(op.loc);
      out_.reads.push_back({op.tag, hash, std::nullopt});
      maintain();
      return;
    }
    const std::byte* p = buf + k_header_bytes;
    ++stats_.reads;
    stats_.read_bytes += op.loc.payload;
    out_.reads.push_back({op.tag, hash, copy_out(p, op.loc.payload)});
  }

  /// Makes event_fd() readable when results are waiting that no completion will announce.
  void announce() {
    if (!out_.empty()) ring_->signal();
  }

  store_options opts_;
  std::unique_ptr<uring> ring_;
  bool direct_ = true;
  std::vector<slot_op> ops_;
  std::vector<unsigned> free_slots_;
  std::vector<io_done> done_;

  std::map<std::uint64_t, segment> segments_;
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

result<std::unique_ptr<segment_store>> segment_store::open(const store_options& opts) {
  auto start = clock::now();
  std::error_code ec;
  std::filesystem::create_directories(opts.dir, ec);
  if (ec) return fail(errc::io_error, "cannot create ", opts.dir.string(), ": ", ec.message());
  auto ring = uring::create(std::max(1u, opts.queue_depth));
  if (!ring) return std::move(ring).err();
  auto p = std::make_unique<impl>(opts, std::move(*ring));
  if (auto r = p->scan(start); !r) return std::move(r).err();
  if (opts.payload_hint > 0) p->prepare_slots(record_bytes(opts.payload_hint));
  p->warm_up();
  p->stats_.open_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return std::unique_ptr<segment_store>(new segment_store(std::move(p)));
}

segment_store::segment_store(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
segment_store::~segment_store() = default;

int segment_store::event_fd() const { return impl_->ring_->event_fd(); }

bool segment_store::write(const record_meta& meta, std::vector<std::byte> payload) {
  auto& s = *impl_;
  s.check_space();
  auto refuse = [&](bool dropped) {
    if (dropped) ++s.stats_.dropped_writes;
    block_buffers::shared().give(std::move(payload));
    return false;
  };
  if (s.degraded_) return refuse(true);
  if (s.index_.contains(meta.hash) || s.writing_.contains(meta.hash)) return refuse(false);
  if (payload.size() > k_max_payload_bytes ||
      (!s.write_queue_.empty() && s.queued_bytes_ + payload.size() > k_max_queued_bytes)) {
    return refuse(true);
  }
  s.writing_.insert(meta.hash);
  s.queued_bytes_ += payload.size();
  s.write_queue_.push_back({meta, std::move(payload)});
  s.pump();
  s.announce();
  return true;
}

bool segment_store::read(const kv::block_hash& hash, std::uint64_t tag) {
  auto& s = *impl_;
  if (!s.index_.contains(hash)) return false;
  s.read_queue_.push_back({hash, tag});
  s.pump();
  s.announce();
  return true;
}

completions segment_store::poll() {
  auto& s = *impl_;
  s.ring_->clear_event();
  s.collect();
  s.check_space();
  s.pump();
  return std::exchange(s.out_, {});
}

std::size_t segment_store::flush(std::chrono::steady_clock::time_point deadline) {
  auto& s = *impl_;
  for (;;) {
    s.pump();
    if (s.write_queue_.empty() && s.read_queue_.empty() && s.ring_->in_flight() == 0) break;
    if (clock::now() >= deadline) break;
    s.ring_->wait(deadline);
    s.collect();
  }
  s.announce();
  return s.write_queue_.size() + s.read_queue_.size() + s.ring_->in_flight();
}

bool segment_store::contains(const kv::block_hash& hash) const { return impl_->index_.contains(hash); }

std::vector<record_meta> segment_store::catalog() const {
  std::vector<record_meta> out;
  out.reserve(impl_->index_.size());
  for (const auto& [hash, loc] : impl_->index_) out.push_back(loc.meta);
  return out;
}

store_stats segment_store::stats() const {
  auto st = impl_->stats_;
  st.records = impl_->index_.size();
  st.bytes = impl_->total_bytes_;
  st.segments = impl_->segments_.size();
  st.degraded = impl_->degraded_;
  return st;
}

}  // namespace strata::ssd
