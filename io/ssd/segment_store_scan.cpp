// segment_store, opening: the header scan that rebuilds the index from the segment files, and the
// warm-up of the memory the first restore will use.
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/ssd/segment_store_impl.hpp"
#include "src/common/block_buffers.hpp"

namespace strata::ssd {

std::optional<std::uint64_t> parse_segment_name(std::string_view name) {
  if (name.size() != 23 || !name.starts_with("seg-") || !name.ends_with(".kv")) return std::nullopt;
  std::uint64_t id = 0;
  auto digits = name.substr(4, 16);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id, 16);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return id;
}

int segment_store::impl::open_file(const std::filesystem::path& p, int flags) {
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

result<void> segment_store::impl::scan(clock::time_point start) {
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
      const kv::block_hash key = record_key(f.meta);
      auto [it, fresh] = index_.try_emplace(key);
      if (!fresh) {
        ++counts.duplicates;
        --segments_.at(it->second.segment).live;
      }
      it->second = location{c.seg->id, f.offset, f.payload, f.meta};
      ++c.seg->live;
      c.seg->hashes.push_back(key);
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

void segment_store::impl::scan_headers(std::vector<cursor>& cursors, scan_counts& counts) {
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
  // Progress: the bytes of the segments behind every cursor's offset, of all their bytes.
  std::uint64_t total = 0;
  for (const auto& c : cursors) total += c.seg->bytes;
  auto reported = clock::now();
  for (;;) {
    if (opts_.progress && total > 0 && clock::now() - reported >= std::chrono::seconds(1)) {
      reported = clock::now();
      std::uint64_t scanned = 0;
      for (std::size_t c = 0; c < cursors.size(); ++c) scanned += c < next ? cursors[c].offset : 0;
      opts_.progress(static_cast<double>(scanned) / static_cast<double>(total));
    }
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

bool segment_store::impl::step(cursor& cur, int res, const std::byte* block, scan_counts& counts) {
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
  if (!readable(*h)) {
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

void segment_store::impl::prepare_slots(std::size_t bytes) {
  std::size_t mapped = 0;
  for (unsigned s : free_slots_) {
    if (mapped + bytes > staging_budget) break;
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
void segment_store::impl::warm_up() {
  if (index_.empty()) return;
  const auto start = clock::now();
  std::uint64_t payload = 0;
  for (const auto& [hash, loc] : index_) payload = std::max(payload, loc.payload);
  const std::size_t buffers = block_buffers::shared().prefill(payload, index_.size());
  warm_slots();
  spdlog::info("ssd: staging and {} payload buffers ({} MiB) readied in {:.2f} s", buffers, (buffers * payload) >> 20,
               std::chrono::duration<double>(clock::now() - start).count());
}

void segment_store::impl::warm_slots() {
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

}  // namespace strata::ssd
