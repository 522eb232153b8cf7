#pragma once
// The gtest name of a test instantiated for one shared model: its name with '-' as '_'.

#include <algorithm>
#include <string>

namespace strata::model::golden_testing {

/// For INSTANTIATE_TEST_SUITE_P: the model name of `info.param`, usable as a test name.
inline constexpr auto model_param_name = [](const auto& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
};

}  // namespace strata::model::golden_testing
