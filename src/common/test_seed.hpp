#pragma once
// The seed of a random test: STRATA_TEST_SEED when set (to rerun a failure), else a fresh one.
// Printed either way, so that every failure can be replayed.

#include <cstdio>
#include <cstdlib>
#include <random>

namespace strata {

inline unsigned test_seed() {
  const char* env = std::getenv("STRATA_TEST_SEED");
  const unsigned seed = env && *env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
  std::printf("seed %u (rerun with STRATA_TEST_SEED=%u)\n", seed, seed);
  return seed;
}

}  // namespace strata
