#pragma once
// token_counts: how often each token id occurs, for the sampler's penalties. An open-addressing
// table (linear probing, backward-shift deletion, no tombstones) whose storage only grows, so
// counting a sequence's tokens allocates nothing per token once the table has its size.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::sampling {

class token_counts {
 public:
  /// Makes room for `n` distinct tokens without growing later.
  void reserve(std::size_t n);

  /// Adds one occurrence of `token` (>= 0; negative ids are ignored).
  void add(std::int32_t token);

  /// Removes one occurrence of `token`; the token is gone at zero. Absent tokens are ignored.
  void remove(std::int32_t token);

  /// How often `token` occurs (0 when absent).
  std::int32_t count(std::int32_t token) const noexcept;

  /// Number of distinct tokens with a count above zero.
  std::size_t size() const noexcept { return size_; }

  /// Forgets every token, keeping the storage.
  void clear() noexcept;

  /// Calls f(token, count) for each distinct token, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const slot& s : slots_)
      if (s.token >= 0) f(s.token, s.count);
  }

 private:
  struct slot {
    std::int32_t token = -1;  // -1: empty
    std::int32_t count = 0;
  };
  std::size_t home(std::int32_t token) const noexcept {
    return (static_cast<std::uint32_t>(token) * 0x9E3779B1u) >> shift_;
  }
  void rehash(std::size_t capacity);

  std::vector<slot> slots_;  // a power of two in size, at most half full
  std::size_t size_ = 0;
  unsigned shift_ = 32;
};

}  // namespace strata::sampling
