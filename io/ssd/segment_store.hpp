#pragma once
// segment_store: the SSD tier's files. Append-only segment files written with O_DIRECT through one
// io_uring ring, an in-memory index rebuilt from the segment headers at open, and size-capped LRU
// eviction of whole segments. Plain class, no Asio and no threads: the ssd_store actor owns one,
// calls it from its handlers, and waits on event_fd() for completions.
//
// On disk (dir/seg-<16 hex digits>.kv, numbered in write order):
//
//   | record | record | ...          record = | header, 4096 B | payload, padded to 4096 B |
//
//   header: magic "STRATAKV", format version, model fingerprint, KV format, block hash, parent
//           hash, token count, layer count, payload length, xxh3-64 of the payload, xxh3-64 of the
//           header itself (last field). Little-endian, fixed layout (see record_format.hpp).
//
// A record counts only when its header checksum verifies at the scan and its payload checksum at
// the read: a torn, truncated, zeroed or bit-flipped record is a miss with a log line, never wrong
// data. Records of another model fingerprint or format version are skipped at the scan. A segment
// is never appended to after a restart (its tail may be torn): a new one is started; segments
// left with no valid record are deleted at open.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "src/common/error.hpp"
#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"
#include "src/kv/snapshot_index.hpp"

namespace strata::ssd {

/// What a record holds: a block's KV, or a frozen boundary snapshot (kv::state_snapshot) of the
/// non-sliceable state at the end of the block `hash` names.
enum class record_kind : std::uint8_t { block = 0, snapshot = 1 };

/// What a record says about its block besides the payload.
struct record_meta {
  record_kind kind = record_kind::block;
  kv::block_hash hash;
  kv::block_hash parent;
  kv::kv_format format = kv::kv_format::f16;
  std::int32_t tokens = 0;
  std::int32_t layers = 0;
  /// A partial block's token ids (`tokens` of them); empty for a full block, which its hash names.
  std::vector<std::int32_t> token_ids;
};

/// The key a snapshot record is indexed under (kv::snapshot_key: apart from its block's).
using kv::snapshot_key;

/// The key a record is indexed under (and that read(), contains() and completions use): the
/// block's hash, or snapshot_key of it for a snapshot.
inline kv::block_hash record_key(const record_meta& m) {
  return m.kind == record_kind::snapshot ? snapshot_key(m.hash) : m.hash;
}

struct store_options {
  std::filesystem::path dir;
  /// Fingerprint of the model file: records of any other model are skipped.
  std::array<std::uint64_t, 2> model{};
  /// Disk budget: past it, whole segments are deleted, least recently used first.
  std::uint64_t max_bytes = 10ull << 30;
  /// A segment is closed and a new one started past this size.
  std::uint64_t segment_bytes = 256ull << 20;
  /// io_uring submission queue entries (and the most I/Os in flight).
  unsigned queue_depth = 64;
  /// The payload size records will have (the KV of one block), when known: the staging buffers
  /// are mapped and registered for it at open, so the first restore after a start does not pay
  /// for setting them up. 0: buffers grow as records come.
  std::size_t payload_hint = 0;
  /// Called while open() rebuilds the index, about once a second, with the fraction of the
  /// segment bytes scanned so far (for the log and the dashboard); may be empty.
  std::function<void(double)> progress;
  /// O_DIRECT; when the file system refuses it (tmpfs), the store falls back to buffered I/O and
  /// logs it once.
  bool direct = true;
};

/// Figures for metrics and the admin stats.
struct store_stats {
  std::uint64_t records = 0;        // in the index
  std::uint64_t bytes = 0;          // of all segment files
  std::uint64_t segments = 0;
  std::uint64_t writes = 0;         // records written and completed
  std::uint64_t write_bytes = 0;
  std::uint64_t reads = 0;          // records read and verified
  std::uint64_t read_bytes = 0;
  std::uint64_t read_failures = 0;  // checksum, short read or I/O error on read
  std::uint64_t dropped_writes = 0; // refused while degraded, failed, or over the queue limit
  std::uint64_t evicted_segments = 0;
  bool degraded = false;            // ENOSPC (or another write error): writes refused for now
  double open_seconds = 0;          // time to rebuild the index at open
};

/// A finished read: the payload when the record was found and verified, else nullopt (a miss).
struct read_result {
  std::uint64_t tag = 0;
  kv::block_hash hash;
  std::optional<std::vector<std::byte>> payload;
};

/// What poll() collected since the last call.
struct completions {
  /// Records now durable in the index (write completed), by record_key as are the others here.
  std::vector<kv::block_hash> written;
  /// Records whose write failed (ENOSPC, an I/O error) or that were still queued when one did:
  /// the store stopped writing (degraded). Not on disk, and the store keeps nothing of them; the
  /// caller may offer them again once degraded() is false.
  std::vector<record_meta> deferred;
  std::vector<read_result> reads;
  /// Records that left the index: their segment was evicted (max_bytes), or a read found them
  /// corrupt.
  std::vector<kv::block_hash> removed;
  bool empty() const { return written.empty() && deferred.empty() && reads.empty() && removed.empty(); }
};

class segment_store {
 public:
  /// Creates dir if needed, scans every segment's headers and builds the index (logging how many
  /// records, how many skipped and why, and how long it took). Fails only when the directory
  /// cannot be created or read, or io_uring cannot be set up.
  static result<std::unique_ptr<segment_store>> open(const store_options& opts);
  ~segment_store();
  segment_store(const segment_store&) = delete;
  segment_store& operator=(const segment_store&) = delete;

  /// An eventfd that becomes readable when completions are waiting (io_uring_register_eventfd).
  int event_fd() const;

  /// Queues a record. The payload is moved in (a frozen copy; the caller keeps nothing). Returns
  /// false, dropping it, when the hash is already stored or being written, the store is degraded,
  /// or the records waiting for the disk already hold 256 MiB; true when queued (its outcome comes
  /// back through poll()).
  bool write(const record_meta& meta, std::vector<std::byte> payload);
  /// Queues a read of the record with this key (record_key: a block's hash, snapshot_key for a
  /// snapshot); the result comes back through poll() with `tag`.
  /// Returns false (and queues nothing) when the hash is not in the index.
  bool read(const kv::block_hash& hash, std::uint64_t tag);

  /// Submits what is queued, reaps finished I/O without blocking, and returns what finished.
  completions poll();
  /// Blocks until every queued and in-flight I/O has finished or the deadline passes; returns the
  /// number of I/Os still unfinished (0: all flushed). Completions stay for the next poll().
  std::size_t flush(std::chrono::steady_clock::time_point deadline);

  /// Deletes every segment file with no I/O in flight and no other model's records: their records
  /// leave the index and come back as `removed` from the next poll(). Returns the records left
  /// (in segments busy with I/O, or shared with another model's records).
  std::size_t clear();

  /// Whether a record of this key (record_key) is in the index.
  bool contains(const kv::block_hash& key) const;
  /// The metadata of the record with this key, when it is in the index.
  std::optional<record_meta> meta(const kv::block_hash& key) const;
  /// The model fingerprint its records carry (store_options::model).
  const std::array<std::uint64_t, 2>& model() const;
  /// Whether writes are refused for now: a write failed (ENOSPC or another error) and the file
  /// system has not shown enough free space since. Checked again, at most once a second, by
  /// write() and poll(), which resume writing once there is room.
  bool degraded() const;
  /// Every hash in the index with its metadata (the scheduler's catalog at start).
  std::vector<record_meta> catalog() const;
  store_stats stats() const;

 private:
  struct impl;
  explicit segment_store(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace strata::ssd
