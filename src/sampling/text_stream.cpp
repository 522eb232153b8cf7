#include "src/sampling/text_stream.hpp"

#include <algorithm>

namespace strata::sampling {
namespace {

/// Bytes at the end of s that start a UTF-8 character not yet complete.
std::size_t incomplete_utf8_tail(const std::string& s) {
  for (std::size_t back = 1; back <= std::min<std::size_t>(4, s.size()); ++back) {
    auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    std::size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

text_stream::text_stream(std::vector<std::string> stop) : stop_(std::move(stop)) {
  stop_.erase(std::remove(stop_.begin(), stop_.end(), std::string()), stop_.end());
}

text_stream::output text_stream::feed(const std::string& piece) {
  output out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  held_ += piece;
  // A complete stop string: release what precedes the earliest one, and stop.
  std::size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    out.text = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    out.stopped = true;
    return out;
  }
  // Hold the longest tail that is a prefix of some stop string.
  std::size_t hold = 0;
  for (const auto& s : stop_) {
    for (std::size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  hold = std::max(hold, incomplete_utf8_tail(held_));
  out.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string text_stream::finish() {
  if (stopped_) return {};
  std::string out = std::move(held_);
  held_.clear();
  if (std::size_t bad = incomplete_utf8_tail(out)) out.replace(out.size() - bad, bad, "\xEF\xBF\xBD");
  return out;
}

}  // namespace strata::sampling
