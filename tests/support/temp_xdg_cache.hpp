#pragma once
// A test binary whose tests load engines registers temp_xdg_cache: what an engine keeps under
// $XDG_CACHE_HOME (the q4_0 mean keys, server/engine/q4_key_file.hpp) then goes into a temporary
// folder of the binary's own, removed at its end, never into the user's ~/.cache.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace strata::test_support {

class temp_xdg_cache final : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string t = (std::filesystem::temp_directory_path() / "strata_test_xdg_XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
    ::setenv("XDG_CACHE_HOME", t.c_str(), 1);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  std::filesystem::path dir_;
};

/// Registers one temp_xdg_cache for the whole binary, however many files include this header.
inline ::testing::Environment* const k_temp_xdg_cache = ::testing::AddGlobalTestEnvironment(new temp_xdg_cache);

}  // namespace strata::test_support
