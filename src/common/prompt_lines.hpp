#pragma once
// The prompt files of the logits dumps: one prompt a line, `\n` inside a line standing for a
// newline. `strata logits` and bench/reference/dump_logits.cpp (llama.cpp's side of the same
// dumps) read them alike through this one function, so their prompts cannot drift apart.
//
// Header-only C++17 without dependencies: dump_logits.cpp is C++17, linked against llama.cpp and
// built outside strata's build (bench/reference_dumps.sh compiles it with -I of the project root).

#include <cstddef>
#include <string>

namespace strata {

/// The prompt a line of a prompts file stands for: each `\n` (a backslash, then n) becomes a
/// newline; every other byte, a lone backslash included, stays as it is.
inline std::string unescape_newlines(const std::string& line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += line[i];
    }
  }
  return out;
}

}  // namespace strata
