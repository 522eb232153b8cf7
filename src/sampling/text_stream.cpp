#include "src/sampling/text_stream.hpp"

#include <algorithm>

#include "src/common/utf8.hpp"

namespace strata::sampling {

result<void> text_stream::validate_stop(const std::vector<std::string>& stop) {
  if (stop.size() > max_stop_strings) return fail(errc::invalid_argument, "stop takes at most ", max_stop_strings, " sequences, got ", stop.size());
  for (const auto& s : stop)
    if (s.empty()) return fail(errc::invalid_argument, "stop sequences must not be empty");
  return {};
}

text_stream::text_stream(std::vector<std::string> stop) {
  for (std::size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) continue;
    matcher m;
    m.text = utf8::sanitize(stop[i]);
    m.index = static_cast<int>(i);
    m.fail.assign(m.text.size(), 0);
    for (std::size_t q = 1, k = 0; q < m.text.size(); ++q) {
      while (k > 0 && m.text[q] != m.text[k]) k = m.fail[k - 1];
      if (m.text[q] == m.text[k]) ++k;
      m.fail[q] = static_cast<std::uint32_t>(k);
    }
    stops_.push_back(std::move(m));
  }
}

bool text_stream::push_byte(char b) {
  held_.push_back(b);
  std::size_t longest = 0;
  for (auto& m : stops_) {
    std::uint32_t k = m.state;
    while (k > 0 && m.text[k] != b) k = m.fail[k - 1];
    if (m.text[k] == b) ++k;
    if (k == m.text.size()) {
      // Several may end on this byte: the longest cuts earliest.
      if (k > longest) {
        longest = k;
        matched_ = m.index;
      }
      k = m.fail[k - 1];
    }
    m.state = k;
  }
  if (longest == 0) return false;
  cut_ = held_.size() - longest;
  return true;
}

bool text_stream::push_text(std::string_view text) {
  for (char b : text)
    if (push_byte(b)) return true;
  return false;
}

std::string text_stream::release(std::size_t n) {
  std::string out = held_.substr(0, n);
  held_.erase(0, n);
  emitted_bytes_ += out.size();
  emitted_chars_ += utf8::count_code_points(out);
  return out;
}

text_stream::output text_stream::feed(std::string_view piece) {
  output out;
  if (stopped() || finished_) {
    out.stopped = stopped();
    return out;
  }
  raw_.append(piece);
  std::size_t pos = 0;
  bool hit = false;
  while (pos < raw_.size() && !hit) {
    auto q = utf8::next_sequence(std::string_view(raw_).substr(pos));
    if (q.kind == utf8::sequence_kind::incomplete) break;
    hit = push_text(q.kind == utf8::sequence_kind::complete ? std::string_view(raw_).substr(pos, q.length) : utf8::replacement);
    pos += q.length;
  }
  raw_.erase(0, pos);
  if (hit) {
    out.text = release(cut_);
    out.stopped = true;
    held_.clear();
    raw_.clear();
    return out;
  }
  // A later match can only start inside the longest tail that is a prefix of some stop string.
  std::size_t keep = 0;
  for (const auto& m : stops_) keep = std::max<std::size_t>(keep, m.state);
  out.text = release(held_.size() - keep);
  return out;
}

std::string text_stream::finish() {
  if (stopped() || finished_) return {};
  finished_ = true;
  // An incomplete character left at the end is one ill-formed part: one U+FFFD, which may still
  // complete a stop string that ends in U+FFFD.
  if (!raw_.empty() && push_text(utf8::replacement)) {
    raw_.clear();
    std::string out = release(cut_);
    held_.clear();
    return out;
  }
  raw_.clear();
  return release(held_.size());
}

}  // namespace strata::sampling
