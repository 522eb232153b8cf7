#pragma once
// for_rows: the forward pass's way of splitting row-wise work (norms, activations, per-row
// preparation) over the compute pool only when there is enough of it.

#include <cstdint>
#include <functional>

#include "kernels/compute_pool.hpp"

namespace strata::model {

/// Runs fn(begin, end) over [0, n) rows of `per_row` values each: split over the pool when there
/// is enough work to pay for the hand-off (a prefill chunk), on this thread otherwise (decode).
template <class Fn>
void for_rows(kernels::compute_pool& pool, std::int64_t n, std::int64_t per_row, Fn&& fn) {
  constexpr std::int64_t k_min_pooled_values = 1 << 15;
  if (pool.size() == 1 || n < 2 || n * per_row < k_min_pooled_values) {
    fn(std::int64_t{0}, n);
    return;
  }
  pool.run_split(n, 1, std::ref(fn));
}

}  // namespace strata::model
