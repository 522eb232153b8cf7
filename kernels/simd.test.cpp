#include "kernels/simd.hpp"

#include <gtest/gtest.h>

namespace strata::kernels {
namespace {

TEST(simd, without_strata_isa_the_best_level_of_the_cpu_runs) {
  for (auto best : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    EXPECT_EQ(choose_simd_level(nullptr, best).level, best);
    EXPECT_EQ(choose_simd_level("", best).level, best);
    EXPECT_TRUE(choose_simd_level(nullptr, best).error.empty());
  }
}

TEST(simd, strata_isa_forces_a_level_at_or_below_the_best) {
  const simd_choice a = choose_simd_level("scalar", simd_level::avx512);
  EXPECT_EQ(a.level, simd_level::scalar);
  EXPECT_TRUE(a.error.empty());
  const simd_choice b = choose_simd_level("avx2", simd_level::avx2);
  EXPECT_EQ(b.level, simd_level::avx2);
  EXPECT_TRUE(b.error.empty());
}

TEST(simd, strata_isa_refuses_a_level_the_cpu_lacks_and_says_what_it_has) {
  const simd_choice c = choose_simd_level("avx512", simd_level::avx2);
  EXPECT_EQ(c.error, "STRATA_ISA=avx512: this CPU lacks it (it has scalar, avx2)");
  EXPECT_FALSE(choose_simd_level("avx2", simd_level::scalar).error.empty());
}

TEST(simd, strata_isa_refuses_an_unknown_name) {
  const simd_choice c = choose_simd_level("sse4", simd_level::avx512);
  EXPECT_EQ(c.error, "STRATA_ISA=sse4: not a level (scalar, avx2 or avx512; this CPU has scalar, avx2, avx512)");
}

TEST(simd, the_level_in_use_is_enabled_and_none_above_it) {
  const simd_level in_use = active_kernels().level;
  EXPECT_LE(in_use, best_simd_level());
  for (auto l : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) EXPECT_EQ(simd_level_enabled(l), l <= in_use);
  const simd_choice configured = configured_simd_level();
  EXPECT_EQ(configured.level, in_use);
}

TEST(simd, every_table_fills_on_any_cpu_and_names_its_level) {
  // Filling runs no SIMD code (the table fill used to be compiled for AVX-512 and died of SIGILL
  // on CPUs without it; the valgrind test, whose CPU has no AVX-512, runs this).
  for (auto l : {simd_level::scalar, simd_level::avx2, simd_level::avx512}) {
    EXPECT_EQ(kernels_for(l).level, l);
    EXPECT_NE(kernels_for(l).dot, nullptr);
  }
}

}  // namespace
}  // namespace strata::kernels
