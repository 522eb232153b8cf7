// segment_store: the public calls, the staging slots and the I/O loop that feeds the ring. The
// parts of segment_store::impl live in the files segment_store_impl.hpp lists.
#include "io/ssd/segment_store.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "io/ssd/segment_store_impl.hpp"
#include "src/common/block_buffers.hpp"

namespace strata::ssd {
namespace {
using clock = std::chrono::steady_clock;
}  // namespace

std::string segment_name(std::uint64_t id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "seg-0000000000000000.kv";
  for (int i = 0; i < 16; ++i) s[4 + 15 - i] = digits[(id >> (4 * i)) & 15];
  return s;
}

segment_store::impl::impl(const store_options& o, std::unique_ptr<uring> r)
    : opts_(o), ring_(std::move(r)), direct_(o.direct), ops_(ring_->slots()) {
  for (unsigned s = ring_->slots(); s-- > 0;) free_slots_.push_back(s);
}

segment_store::impl::~impl() {
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

// --- staging slots and the I/O loop ---------------------------------------------------------------

std::optional<unsigned> segment_store::impl::take_slot(std::size_t bytes) {
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
  if (ring_->in_flight() > 0 && ring_->mapped_bytes() - ring_->capacity(s) + bytes > staging_budget) {
    return std::nullopt;
  }
  if (!ring_->reserve(s, bytes)) return std::nullopt;
  free_slots_.pop_back();
  return s;
}

void segment_store::impl::give_slot(unsigned s) {
  ops_[s] = {};
  free_slots_.push_back(s);
}

void segment_store::impl::pump() {
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

void segment_store::impl::collect() {
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

void segment_store::impl::announce() {
  if (!out_.empty()) ring_->signal();
}

// --- the public calls ----------------------------------------------------------------------------

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
  const kv::block_hash key = record_key(meta);
  if (s.index_.contains(key) || s.writing_.contains(key)) return refuse(false);
  if (payload.size() > k_max_payload_bytes ||
      (!s.write_queue_.empty() && s.queued_bytes_ + payload.size() > impl::max_queued_bytes)) {
    return refuse(true);
  }
  s.writing_.insert(key);
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

std::optional<record_meta> segment_store::meta(const kv::block_hash& key) const {
  auto it = impl_->index_.find(key);
  return it == impl_->index_.end() ? std::nullopt : std::optional<record_meta>(it->second.meta);
}

const std::array<std::uint64_t, 2>& segment_store::model() const { return impl_->opts_.model; }

bool segment_store::degraded() const { return impl_->degraded_; }

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
