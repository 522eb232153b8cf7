#pragma once
// Test support: a fixed time for the templates that read the clock (strftime_now).

#include <chrono>
#include <ctime>

namespace strata::chat::testing {

/// Noon UTC on 2026-01-15: the same calendar day in every time zone from UTC-12 to UTC+11.
inline std::chrono::system_clock::time_point fixed_day() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_hour = 12;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace strata::chat::testing
