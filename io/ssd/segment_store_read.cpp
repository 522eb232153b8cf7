// segment_store, reading: a record is read whole into a staging buffer and used only when its
// header and payload checksums verify; anything else is a miss that takes it out of the index.
#include <cstring>

#include <spdlog/spdlog.h>

#include "io/ssd/segment_store_impl.hpp"
#include "src/common/block_buffers.hpp"

namespace strata::ssd {
namespace {

std::string short_hex(const kv::block_hash& h) { return h.hex().substr(0, 16); }

/// A payload copied out of its staging buffer into a block buffer the caller owns (and the
/// pipeline gives back once the block is in its pages).
std::vector<std::byte> copy_out(const std::byte* p, std::size_t n) { return block_buffers::shared().copy(p, n); }

}  // namespace

bool segment_store::impl::start_read() {
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

const char* segment_store::impl::verify(const slot_op& op, int res, const std::byte* buf) const {
  if (res < 0) return std::strerror(-res);
  if (res != static_cast<int>(op.length)) return "short read";
  header_fault fault{};
  auto h = decode_header(std::span(buf, k_header_bytes), &fault);
  if (!h) return fault == header_fault::bad_checksum ? "header checksum mismatch" : "no valid header";
  if (!readable(*h) || h->model != opts_.model) return "another record's header";
  if (h->hash != op.loc.meta.hash.w || h->kind != static_cast<std::uint8_t>(op.loc.meta.kind)) return "another block's header";
  if (h->payload_bytes != op.loc.payload) return "payload length changed";
  if (payload_checksum(std::span(buf + k_header_bytes, op.loc.payload)) != h->payload_xxh3) {
    return "payload checksum mismatch";
  }
  return nullptr;
}

void segment_store::impl::finish_read(const slot_op& op, int res, const std::byte* buf) {
  auto& seg = segments_.at(op.loc.segment);
  --seg.in_flight;
  const kv::block_hash hash = record_key(op.loc.meta);
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

}  // namespace strata::ssd
