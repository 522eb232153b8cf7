// Token runs for the KV cache's tests (test code only).
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace strata::kv::test_tokens {

using tokens_t = std::vector<std::int32_t>;

/// first, first + 1, ..., first + n - 1.
inline tokens_t iota_tokens(int n, std::int32_t first = 1) {
  tokens_t t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

}  // namespace strata::kv::test_tokens
