// Token runs for the KV cache's tests, and a sequence run through a manager (test code only).
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "src/kv/kv_cache_manager.hpp"

namespace strata::kv::test_tokens {

using tokens_t = std::vector<std::int32_t>;

/// first, first + 1, ..., first + n - 1.
inline tokens_t iota_tokens(int n, std::int32_t first = 1) {
  tokens_t t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

/// Computes `tokens` up to n_computed in sequence id (in f16; all blocks published) and lets go.
inline void run(kv_cache_manager& m, std::uint64_t id, const tokens_t& tokens, std::int32_t n_computed) {
  m.match(id, kv_format::f16, tokens);
  ASSERT_EQ(m.cover(id, n_computed), n_computed);
  m.publish(id, tokens, n_computed);
  m.release(id, tokens, n_computed);
}

}  // namespace strata::kv::test_tokens
