#pragma once
// A fresh folder of a test's own (mkdtemp under the system's temporary folder, named from a
// prefix), removed with everything in it when it goes out of scope.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <gtest/gtest.h>

namespace strata::test_support {

struct temp_dir {
  std::filesystem::path path;

  explicit temp_dir(std::string_view prefix = "strata-test") {
    std::string t = (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr) << "cannot make a temporary folder " << t;
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// A path inside the folder.
  std::filesystem::path file(std::string_view name) const { return path / name; }
};

}  // namespace strata::test_support
