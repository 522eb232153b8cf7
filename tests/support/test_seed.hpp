#pragma once
// test_seed(): the seed of a random test. Taken from STRATA_TEST_SEED when set, else drawn; either
// way printed and recorded, so a failure can be rerun with the same inputs.
//
// Header-only and outside the floors (kernels/ to server/ may all include it): test code only.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace strata {

/// Parses STRATA_TEST_SEED's value: a decimal number that fits in 32 bits, else nullopt.
inline std::optional<std::uint32_t> parse_test_seed(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (*end != '\0' || text[0] == '-' || v > 0xffffffffull) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

/// The seed of the running test: STRATA_TEST_SEED when set (a test fails on a malformed one),
/// else a fresh draw from std::random_device. The first call in a test prints
///
///   seed = N (rerun with STRATA_TEST_SEED=N --gtest_filter=suite.name)
///
/// and records it as the test's `seed` property (in the XML report); later calls in the same test
/// return the recorded N, so a test that seeds two generators from it reruns both. Each run of a
/// test (--gtest_repeat) draws afresh.
inline std::uint32_t test_seed() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info) {
    const ::testing::TestResult& result = *info->result();
    for (int i = 0; i < result.test_property_count(); ++i) {
      const ::testing::TestProperty& p = result.GetTestProperty(i);
      if (std::string_view(p.key()) == "seed") return static_cast<std::uint32_t>(std::strtoul(p.value(), nullptr, 10));
    }
  }
  const char* env = std::getenv("STRATA_TEST_SEED");
  std::uint32_t seed = 0;
  if (env && *env) {
    const auto parsed = parse_test_seed(env);
    EXPECT_TRUE(parsed) << "STRATA_TEST_SEED=" << env << " is not a 32-bit decimal number";
    seed = parsed.value_or(0);
  } else {
    seed = std::random_device{}();
  }
  const std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("*");
  std::printf("seed = %u (rerun with STRATA_TEST_SEED=%u --gtest_filter=%s)\n", seed, seed, test.c_str());
  std::fflush(stdout);
  if (info) ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace strata
