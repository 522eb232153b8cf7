#pragma once
// window_ring: what a sliding-window layer keeps of each sequence: the keys and values of its last
// positions only, in a ring of pages per state slot, so that a long sequence costs the window and
// not its whole context. A row at position p attends [p - window + 1, p]; a step writes up to
// max_chunk rows of a sequence before any of them attends, so the ring holds
// window + max_chunk - 1 positions (rounded up to whole pages):
//
//   ring of slot s, format f: pages base(f) + s * R .. base(f) + s * R + R - 1;
//   position p lives in ring page (p / page_tokens) % R, row p % page_tokens.
//
// The attention kernels read a sequence's KV through a block table (page i: positions
// [i * page_tokens, (i + 1) * page_tokens)); table() builds one whose entries are ring pages, so
// the same kernels attend over the ring. Like a recurrent state, a ring cannot be cut back to an
// earlier position: a slot holds its sequence's window after its last position (end()), and
// save() copies the positions a later row can still see out by value (a frozen boundary
// snapshot), which load() writes back into any slot. Pages are reserved for every format and
// backed only when first written.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "src/kv/kv_format.hpp"
#include "src/model/layer_kv.hpp"

namespace strata::model {

class window_ring {
 public:
  /// Rings for n_slots sequences of a layer with rows of kv_dim values, attending through
  /// `window` positions, with at most max_chunk rows of a sequence per step. Quantized formats
  /// need kv_dim % 32 == 0 (else only f16 rings exist, as in layer_kv).
  window_ring(std::int32_t n_slots, std::int32_t page_tokens, std::int32_t kv_dim, std::int32_t window, std::int32_t max_chunk);

  std::int32_t slots() const { return n_slots_; }
  std::int32_t window() const { return window_; }
  std::int32_t max_chunk() const { return max_chunk_; }
  /// Pages in one slot's ring.
  std::int32_t ring_pages() const { return ring_pages_; }
  layer_kv& kv() { return kv_; }
  const layer_kv& kv() const { return kv_; }

  /// Sets out to n_blocks entries: entry i is the ring page of `slot` (format f) that holds the
  /// positions of page i. Only the last ring_pages() entries before a row's page are valid for it.
  void table(std::int32_t slot, kv::kv_format f, std::int32_t n_blocks, std::vector<std::int32_t>& out) const;

  /// The slot's sequence, in format f, has now been computed up to position end - 1.
  void advance(std::int32_t slot, kv::kv_format f, std::int32_t end);
  /// The slot starts over (its next sequence starts at position 0).
  void clear(std::int32_t slot);
  /// Positions the slot holds (its sequence's next position).
  std::int32_t end(std::int32_t slot) const { return slots_[static_cast<std::size_t>(slot)].end; }

  /// Appends the slot's state to out: a header (format, end, row count), then the keys and the
  /// values of its last min(end, window - 1) positions, oldest first, in the format's rows.
  void save(std::int32_t slot, std::vector<std::byte>& out) const;
  /// Loads a copy that save() made (of any slot). A copy of another shape (or an empty one) clears
  /// the slot and returns false.
  bool load(std::int32_t slot, std::span<const std::byte> in);
  /// Bytes save() appends for a slot at position end in format f.
  std::size_t saved_bytes(kv::kv_format f, std::int32_t end) const;

 private:
  struct slot_state {
    std::int32_t end = 0;
    kv::kv_format format = kv::kv_format::f16;
  };
  /// The ring page and row of a position.
  std::int32_t page_of(std::int32_t slot, kv::kv_format f, std::int32_t pos) const;
  std::int32_t n_slots_, window_, max_chunk_, ring_pages_;
  layer_kv kv_;
  std::vector<slot_state> slots_;
};

}  // namespace strata::model
