#include "src/sampling/token_counts.hpp"

#include <algorithm>
#include <bit>

namespace strata::sampling {

void token_counts::reserve(std::size_t n) {
  const std::size_t want = std::bit_ceil(std::max<std::size_t>(16, 2 * n));
  if (want > slots_.size()) rehash(want);
}

void token_counts::rehash(std::size_t capacity) {
  std::vector<slot> old = std::move(slots_);
  slots_.assign(capacity, slot{});
  shift_ = 32u - static_cast<unsigned>(std::countr_zero(capacity));
  const std::size_t mask = capacity - 1;
  for (const slot& s : old) {
    if (s.token < 0) continue;
    std::size_t i = home(s.token);
    while (slots_[i].token >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void token_counts::add(std::int32_t token) {
  if (token < 0) return;
  if (2 * (size_ + 1) > slots_.size()) rehash(std::max<std::size_t>(16, 2 * slots_.size()));
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(token);
  while (slots_[i].token >= 0 && slots_[i].token != token) i = (i + 1) & mask;
  if (slots_[i].token < 0) {
    slots_[i].token = token;
    ++size_;
  }
  ++slots_[i].count;
}

std::int32_t token_counts::count(std::int32_t token) const noexcept {
  if (token < 0 || slots_.empty()) return 0;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = home(token);; i = (i + 1) & mask) {
    if (slots_[i].token == token) return slots_[i].count;
    if (slots_[i].token < 0) return 0;
  }
}

void token_counts::remove(std::int32_t token) {
  if (token < 0 || slots_.empty()) return;
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = home(token);
  while (slots_[i].token != token) {
    if (slots_[i].token < 0) return;
    i = (i + 1) & mask;
  }
  if (--slots_[i].count > 0) return;
  --size_;
  // Backward-shift deletion: pull later members of the probe run into the hole when the hole
  // lies on their way from their home slot, so that lookups never stop early.
  for (std::size_t j = (i + 1) & mask; slots_[j].token >= 0; j = (j + 1) & mask) {
    const std::size_t h = home(slots_[j].token);
    const bool hole_on_path = ((j - h) & mask) >= ((j - i) & mask);
    if (hole_on_path) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = slot{};
}

void token_counts::clear() noexcept {
  for (slot& s : slots_) s = slot{};
  size_ = 0;
}

}  // namespace strata::sampling
