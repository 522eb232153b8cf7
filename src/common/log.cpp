#include "src/common/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <random>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "src/common/json_escape.hpp"

namespace strata::log {

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (unsigned char c : s) {
    if (!append_json_escape(out, c)) out += static_cast<char>(c);
  }
  return out;
}

namespace {

/// Formats a record as one JSON object; a leading "[req-...] " becomes "request_id".
class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    std::string_view request_id;
    if (text.starts_with("[req-")) {
      auto close = text.find("] ");
      if (close != std::string_view::npos) {
        request_id = text.substr(1, close - 1);
        text.remove_prefix(close + 2);
      }
    }
    auto t = std::chrono::system_clock::to_time_t(msg.time);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[40];
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    std::string line = "{\"ts\":\"";
    line += ts;
    line += "\",\"level\":\"";
    auto lv = spdlog::level::to_string_view(msg.level);
    line.append(lv.data(), lv.size());
    line += "\"";
    if (!request_id.empty()) {
      line += ",\"request_id\":\"";
      line += json_escape(request_id);
      line += "\"";
    }
    line += ",\"msg\":\"";
    line += json_escape(text);
    line += "\"}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<json_formatter>(); }
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_formatter(bool json) {
  if (json) return std::make_unique<json_formatter>();
  return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
}

void init(std::string_view level, bool json) {
  spdlog::drop("strata");
  auto logger = spdlog::stderr_color_mt("strata");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  spdlog::set_formatter(make_formatter(json));
}

std::string new_request_id() {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}() ^ (static_cast<std::uint64_t>(std::random_device{}()) << 32);
  std::uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  // A bijective mix of a counter: unique within the process, not guessable from the previous one.
  std::uint64_t x = (n + salt) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  char buf[24];
  std::snprintf(buf, sizeof buf, "req-%016llx", static_cast<unsigned long long>(x));
  return buf;
}

void access(std::string_view request_id, std::string_view method, std::string_view path, int status,
            std::int64_t prompt_tokens, std::int64_t cached_tokens, std::int64_t completion_tokens, double ms,
            std::string_view key_name) {
  spdlog::info("[{}] {} {} {} tokens={}+{} cached={} ms={:.1f}{}{}", request_id, method, path, status, prompt_tokens,
               completion_tokens, cached_tokens, ms, key_name.empty() ? "" : " key=", key_name);
}

}  // namespace strata::log
