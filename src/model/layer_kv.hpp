#pragma once
// layer_kv: one layer's keys and values, in fixed pages of `page_tokens` positions. A sequence's
// block table lists its pages in order: position p lives in page table[p / page_tokens], slot
// p % page_tokens. The scheduler's block ids are these page ids, the same in every layer; the id
// also says the page's KV format (src/kv/kv_format.hpp), each format having its own array:
//
//   k[format]: | page 0                                | page 1 | ...
//              | slot 0: kv_head 0 .. n_head_kv-1 row | slot 1 | ... | slot page_tokens-1 |
//              a row: kv_dim values as f16, or as q8_0 / q4_0 blocks of 32   (v: the same layout)
//
// The arrays are reserved up front and left untouched: the OS backs a page only once it is
// written, and a slot is read only after its position was written. They ask for transparent huge
// pages: one fault backs 2 MiB instead of 4 KiB (a 3,000-token prompt's KV would otherwise take
// thousands of faults to compute or to restore), and attention's long scans miss the TLB far less.
// The price is that resident memory grows in 2 MiB steps of each array.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <sys/mman.h>

#include "src/kv/kv_format.hpp"
#include "src/model/huge_pages.hpp"

namespace strata::model {

class layer_kv {
 public:
  /// n_pages f16 pages.
  layer_kv(std::int32_t n_pages, std::int32_t page_tokens, std::int32_t kv_dim)
      : layer_kv(kv::block_space{{n_pages, 0, 0}}, page_tokens, kv_dim) {}
  /// The pages of every format in `space`. Quantized formats need kv_dim % 32 == 0 (else they get
  /// no pages).
  layer_kv(const kv::block_space& space, std::int32_t page_tokens, std::int32_t kv_dim) : space_(space), page_tokens_(page_tokens), kv_dim_(kv_dim) {
    for (kv::kv_format f : kv::k_kv_formats) {
      const auto i = static_cast<std::size_t>(kv::format_index(f));
      if (f != kv::kv_format::f16 && kv_dim % kv::k_kv_quant_block != 0) space_.capacity[i] = 0;
      row_bytes_[i] = kv::kv_row_bytes(f, kv_dim);
      const std::size_t n = static_cast<std::size_t>(space_.capacity[i]) * static_cast<std::size_t>(page_tokens) *
                            static_cast<std::size_t>(row_bytes_[i]);
      if (n == 0) continue;
      k_[i] = map_pages(n);
      v_[i] = map_pages(n);
    }
  }

  /// Backs the first n_pages pages of format f's keys and values now, zeroed, so that the requests
  /// that use them (the pool hands out the lowest ids first) take no page faults: on a fresh
  /// machine a fault that zeroes a huge page costs far more than the attention that follows it.
  /// Returns the bytes backed.
  std::size_t prefault(kv::kv_format f, std::int32_t n_pages) {
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    if (!k_[i] || n_pages <= 0) return 0;
    const std::size_t n = static_cast<std::size_t>(std::min(n_pages, space_.capacity[i])) * static_cast<std::size_t>(page_tokens_) *
                          static_cast<std::size_t>(row_bytes_[i]);
    for (std::byte* a : {k_[i].get(), v_[i].get()}) {
      if (::madvise(a, n, MADV_POPULATE_WRITE) == 0) continue;
      // Kernels before 5.14: a write to each small page backs it (the first of a huge page backs all of it).
      for (std::size_t off = 0; off < n; off += 4096) *static_cast<volatile std::byte*>(a + off) = std::byte{0};
    }
    return 2 * n;
  }

  /// Whether q4_0 keys and values (and the queries that read them) are smoothed and rotated before
  /// quantization (src/model/q4_kv.hpp); on by default, off only to measure what that buys.
  bool rotate_q4() const { return rotate_q4_; }
  void set_rotate_q4(bool on) { rotate_q4_ = on; }
  /// The mean key taken from this layer's q4_0 keys (kv_dim values, src/model/q4_kv.hpp), or null
  /// for none; the caller keeps it alive. Used only with rotate_q4.
  const float* q4_key_mean() const { return q4_key_mean_; }
  void set_q4_key_mean(const float* m) { q4_key_mean_ = m; }

  std::int32_t n_pages() const { return space_.total(); }
  std::int32_t page_tokens() const { return page_tokens_; }
  std::int32_t kv_dim() const { return kv_dim_; }
  const kv::block_space& space() const { return space_; }
  kv::kv_format format_of(std::int32_t page) const { return space_.format_of(page); }
  /// Bytes of one position's row in format f.
  std::int64_t row_bytes(kv::kv_format f) const { return row_bytes_[static_cast<std::size_t>(kv::format_index(f))]; }

  /// The row of keys (values) of one position, in its page's format.
  std::byte* k(std::int32_t page, std::int32_t slot) { return at(k_, page, slot); }
  std::byte* v(std::int32_t page, std::int32_t slot) { return at(v_, page, slot); }
  const std::byte* k(std::int32_t page, std::int32_t slot) const { return at(k_, page, slot); }
  const std::byte* v(std::int32_t page, std::int32_t slot) const { return at(v_, page, slot); }
  /// The start of format f's page array (its first page has id space().base(f)).
  const std::byte* k_pages(kv::kv_format f) const { return k_[static_cast<std::size_t>(kv::format_index(f))].get(); }
  const std::byte* v_pages(kv::kv_format f) const { return v_[static_cast<std::size_t>(kv::format_index(f))].get(); }

 private:
  using arrays = std::array<huge_pages, 3>;
  static huge_pages map_pages(std::size_t n) {
    huge_pages p = map_huge_pages(n);
    if (!p) throw std::bad_alloc();
    return p;
  }
  std::byte* at(const arrays& a, std::int32_t page, std::int32_t slot) const {
    const kv::kv_format f = space_.format_of(page);
    const auto i = static_cast<std::size_t>(kv::format_index(f));
    const auto index = static_cast<std::size_t>(space_.index_in_format(page));
    return a[i].get() + (index * static_cast<std::size_t>(page_tokens_) + static_cast<std::size_t>(slot)) *
                            static_cast<std::size_t>(row_bytes_[i]);
  }
  kv::block_space space_;
  std::int32_t page_tokens_, kv_dim_;
  std::array<std::int64_t, 3> row_bytes_{};
  arrays k_, v_;
  bool rotate_q4_ = true;
  const float* q4_key_mean_ = nullptr;
};

}  // namespace strata::model
