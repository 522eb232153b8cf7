#pragma once
// The byte-level BPE alphabet: GPT-2's reversible mapping of the 256 byte values onto printable
// code points. Printable Latin-1 bytes (33..126, 161..172, 174..255) map to themselves; the other
// 68 bytes map, in order, to U+0100..U+0143. Vocabulary strings are spelled in this alphabet.

#include <array>
#include <cstdint>
#include <string>

#include "src/common/utf8.hpp"

namespace strata::tokenizer {

struct byte_level {
  static constexpr std::uint32_t k_code_points = 0x144;
  std::array<std::string, 256> encode;                    // byte -> UTF-8 of its code point
  std::array<std::int16_t, k_code_points> decode{};       // code point -> byte, -1 if none

  byte_level() {
    decode.fill(-1);
    std::uint32_t extra = 256;
    for (std::uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      std::uint32_t cp = printable ? b : extra++;
      utf8::append(encode[b], cp);
      decode[cp] = static_cast<std::int16_t>(b);
    }
  }

  static const byte_level& get() {
    static const byte_level m;
    return m;
  }
};

}  // namespace strata::tokenizer
