#pragma once
// Test support: raw chunked HTTP/1.1 requests, for the io/ tests that feed or send bytes.

#include <cstdio>
#include <string>
#include <string_view>

namespace strata::io::testing {

/// A chunked POST of `body` in chunks of `chunk` bytes, each chunk-size line followed by
/// `extension`, and the last chunk by `trailers` (each field with its CRLF).
inline std::string chunked_request(std::string_view body, std::size_t chunk, std::string_view extension,
                                   std::string_view trailers) {
  std::string out = "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    auto part = body.substr(at, chunk);
    char size[32];
    std::snprintf(size, sizeof size, "%zx", part.size());
    out.append(size).append(extension).append("\r\n").append(part).append("\r\n");
  }
  out.append("0").append(extension).append("\r\n").append(trailers).append("\r\n");
  return out;
}

}  // namespace strata::io::testing
