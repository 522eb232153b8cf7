#include "src/tokenizer/utf8_streamer.hpp"

#include "src/common/utf8.hpp"

namespace strata::tokenizer {
namespace {

/// Whether s (1 to 3 bytes) is the start of some valid UTF-8 character that is not complete yet.
bool incomplete_prefix(std::string_view s) {
  auto c = static_cast<unsigned char>(s[0]);
  std::size_t need = utf8::lead_length(c);
  if (need <= s.size() || c < 0xC2 || c > 0xF4) return false;
  auto b1 = s.size() > 1 ? static_cast<unsigned char>(s[1]) : 0x80;
  // The second byte's range depends on the lead byte (no overlong forms, surrogates or > U+10FFFF).
  unsigned char lo = 0x80, hi = 0xBF;
  if (c == 0xE0) lo = 0xA0;
  else if (c == 0xED) hi = 0x9F;
  else if (c == 0xF0) lo = 0x90;
  else if (c == 0xF4) hi = 0x8F;
  if (s.size() > 1 && (b1 < lo || b1 > hi)) return false;
  for (std::size_t i = 2; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) return false;
  return true;
}

}  // namespace

std::string utf8_streamer::push(std::string_view piece) {
  held_.append(piece);
  // Find where the last character starts: at most 3 bytes back from the end.
  std::size_t keep = 0;
  for (std::size_t back = 1; back <= 3 && back <= held_.size(); ++back) {
    auto c = static_cast<unsigned char>(held_[held_.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    if (incomplete_prefix(std::string_view(held_).substr(held_.size() - back))) keep = back;
    break;
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string utf8_streamer::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace strata::tokenizer
