#pragma once
// layer_kv: one layer's keys and values, in fixed pages of `page_tokens` positions. A sequence's
// block table lists its pages in order: position p lives in page table[p / page_tokens], slot
// p % page_tokens. The scheduler's block ids are these page ids, the same in every layer.
//
//   k_data: | page 0                          | page 1 | ...
//           | slot 0: kv_head 0 .. n_head_kv-1 | slot 1 | ... | slot page_tokens-1 |
//           each head: head_dim f16 values              (v_data: the same layout)

#include <cstdint>
#include <memory>

namespace strata::model {

class layer_kv {
 public:
  layer_kv(std::int32_t n_pages, std::int32_t page_tokens, std::int32_t kv_dim)
      : n_pages_(n_pages), page_tokens_(page_tokens), kv_dim_(kv_dim),
        size_(static_cast<std::size_t>(n_pages) * page_tokens * kv_dim),
        // Default-initialized: the pages are reserved, and the OS backs them only once written.
        // A slot is read only after its position has been written.
        k_(new std::uint16_t[size_]),
        v_(new std::uint16_t[size_]) {}

  std::int32_t n_pages() const { return n_pages_; }
  std::int32_t page_tokens() const { return page_tokens_; }
  std::int32_t kv_dim() const { return kv_dim_; }

  /// The kv_dim keys (values) of one position.
  std::uint16_t* k(std::int32_t page, std::int32_t slot) { return k_.get() + offset(page, slot); }
  std::uint16_t* v(std::int32_t page, std::int32_t slot) { return v_.get() + offset(page, slot); }
  const std::uint16_t* k(std::int32_t page, std::int32_t slot) const { return k_.get() + offset(page, slot); }
  const std::uint16_t* v(std::int32_t page, std::int32_t slot) const { return v_.get() + offset(page, slot); }

  std::size_t bytes() const { return 2 * size_ * sizeof(std::uint16_t); }

 private:
  std::size_t offset(std::int32_t page, std::int32_t slot) const {
    return (static_cast<std::size_t>(page) * page_tokens_ + static_cast<std::size_t>(slot)) * kv_dim_;
  }
  std::int32_t n_pages_, page_tokens_, kv_dim_;
  std::size_t size_;
  std::unique_ptr<std::uint16_t[]> k_, v_;
};

}  // namespace strata::model
