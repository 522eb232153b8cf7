#include "src/model/window_ring.hpp"

#include <algorithm>
#include <cstring>

namespace strata::model {

namespace {

/// The saved state's header: the format, the sequence's end, the rows that follow, the row size.
struct saved_header {
  std::uint32_t magic = 0x574e4452;  // "RDNW"
  std::uint32_t format = 0;
  std::int32_t end = 0;
  std::int32_t rows = 0;
  std::int64_t row_bytes = 0;
};

std::int32_t pages_for(std::int32_t page_tokens, std::int32_t window, std::int32_t max_chunk) {
  const std::int32_t positions = std::max<std::int32_t>(1, window + max_chunk - 1);
  return (positions + page_tokens - 1) / page_tokens;
}

kv::block_space ring_space(std::int32_t n_slots, std::int32_t ring_pages) {
  const std::int32_t n = n_slots * ring_pages;
  return kv::block_space{{n, n, n}};
}

}  // namespace

window_ring::window_ring(std::int32_t n_slots, std::int32_t page_tokens, std::int32_t kv_dim, std::int32_t window,
                         std::int32_t max_chunk)
    : n_slots_(std::max<std::int32_t>(1, n_slots)),
      window_(std::max<std::int32_t>(1, window)),
      max_chunk_(std::max<std::int32_t>(1, max_chunk)),
      ring_pages_(pages_for(page_tokens, window_, max_chunk_)),
      kv_(ring_space(n_slots_, ring_pages_), page_tokens, kv_dim),
      slots_(static_cast<std::size_t>(n_slots_)) {}

std::int32_t window_ring::page_of(std::int32_t slot, kv::kv_format f, std::int32_t pos) const {
  return kv_.space().base(f) + slot * ring_pages_ + (pos / kv_.page_tokens()) % ring_pages_;
}

void window_ring::table(std::int32_t slot, kv::kv_format f, std::int32_t n_blocks, std::vector<std::int32_t>& out) const {
  out.resize(static_cast<std::size_t>(std::max<std::int32_t>(0, n_blocks)));
  const std::int32_t first = kv_.space().base(f) + slot * ring_pages_;
  for (std::int32_t i = 0; i < n_blocks; ++i) out[static_cast<std::size_t>(i)] = first + i % ring_pages_;
}

void window_ring::advance(std::int32_t slot, kv::kv_format f, std::int32_t end) {
  slots_[static_cast<std::size_t>(slot)] = {end, f};
}

void window_ring::clear(std::int32_t slot) { slots_[static_cast<std::size_t>(slot)] = {}; }

std::size_t window_ring::saved_bytes(kv::kv_format f, std::int32_t end) const {
  const auto rows = static_cast<std::size_t>(std::clamp<std::int32_t>(end, 0, window_ - 1));
  return sizeof(saved_header) + 2 * rows * static_cast<std::size_t>(kv_.row_bytes(f));
}

void window_ring::save(std::int32_t slot, std::vector<std::byte>& out) const {
  const slot_state& s = slots_[static_cast<std::size_t>(slot)];
  saved_header h;
  h.format = static_cast<std::uint32_t>(s.format);
  h.end = s.end;
  h.rows = std::clamp<std::int32_t>(s.end, 0, window_ - 1);
  h.row_bytes = kv_.row_bytes(s.format);
  const std::size_t at = out.size();
  out.resize(at + saved_bytes(s.format, s.end));
  std::byte* p = out.data() + at;
  std::memcpy(p, &h, sizeof h);
  p += sizeof h;
  const auto row = static_cast<std::size_t>(h.row_bytes);
  for (std::int32_t pos = s.end - h.rows; pos < s.end; ++pos, p += row) {
    const std::int32_t page = page_of(slot, s.format, pos), r = pos % kv_.page_tokens();
    std::memcpy(p, kv_.k(page, r), row);
    std::memcpy(p + static_cast<std::size_t>(h.rows) * row, kv_.v(page, r), row);
  }
}

bool window_ring::load(std::int32_t slot, std::span<const std::byte> in) {
  clear(slot);
  saved_header h;
  if (in.size() < sizeof h) return false;
  std::memcpy(&h, in.data(), sizeof h);
  const auto f = kv::kv_format_from_bits(static_cast<int>(h.format));
  if (h.magic != saved_header{}.magic || !f || kv_.space().count(*f) == 0 || h.end < 0 ||
      h.rows != std::clamp<std::int32_t>(h.end, 0, window_ - 1) || h.row_bytes != kv_.row_bytes(*f) ||
      in.size() != saved_bytes(*f, h.end))
    return false;
  const std::byte* p = in.data() + sizeof h;
  const auto row = static_cast<std::size_t>(h.row_bytes);
  for (std::int32_t pos = h.end - h.rows; pos < h.end; ++pos, p += row) {
    const std::int32_t page = page_of(slot, *f, pos), r = pos % kv_.page_tokens();
    std::memcpy(kv_.k(page, r), p, row);
    std::memcpy(kv_.v(page, r), p + static_cast<std::size_t>(h.rows) * row, row);
  }
  advance(slot, *f, h.end);
  return true;
}

}  // namespace strata::model
