// libFuzzer target: arbitrary bytes as what a client sends on one connection, read request after
// request (pipelined) by the reader the server's sessions use, under the server's limits and
// under tight ones that the fuzzer reaches quickly. Each input is fed whole, a byte at a time and
// in 7-byte pieces, as reads from a socket would split it. The reader must answer every input
// with requests or an error code: never crash, throw, hang, or hold more than the header limit
// of unconsumed bytes while it waits for more; and a request it accepts must be framed in only
// one way (check_framing: Transfer-Encoding exactly chunked, never with Content-Length).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/request_reader.hpp"

namespace {

using strata::io::request_limits;
using strata::io::request_reader;
namespace http = strata::io::http;

request_limits limits(std::uint32_t max_header, std::uint64_t max_body) {
  strata::io::http_options opts;
  if (max_header != 0) opts.max_header = max_header;
  if (max_body != 0) opts.max_body = max_body;
  return strata::io::limits_of(opts);
}

/// Hands the reader what the caller holds and drops what it consumed.
void put(request_reader& reader, std::string& held, boost::system::error_code& ec, const request_limits& lim) {
  held.erase(0, reader.put(held, ec));
  // Waiting for more, the reader never makes its caller keep more than a header's worth.
  if (ec == http::error::need_more && held.size() > lim.max_header) std::abort();
}

/// Reads requests from `wire` in pieces of `step` bytes until the bytes end or one is refused,
/// as a session does.
void read_all(std::string_view wire, std::size_t step, const request_limits& lim) {
  std::string held;  // received, not yet consumed: the session's buffer
  std::size_t at = 0;
  for (;;) {
    request_reader reader(lim);
    boost::system::error_code ec = http::error::need_more;
    // Bytes after the previous request (pipelined) come first.
    if (!held.empty()) put(reader, held, ec, lim);
    while (ec == http::error::need_more || (!ec && !reader.done())) {
      if (at == wire.size()) return;  // the client stopped sending
      auto n = std::min(step, wire.size() - at);
      held.append(wire.substr(at, n));
      at += n;
      put(reader, held, ec, lim);
    }
    if (ec) return;  // refused: the session answers and closes
    auto req = reader.release();
    if (req.body().size() > lim.max_body) std::abort();
    if (strata::io::check_framing(req)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const request_limits server = limits(0, 0);
  static const request_limits tight = limits(256, 512);
  std::string_view wire(reinterpret_cast<const char*>(data), size);
  for (const auto* lim : {&server, &tight}) {
    read_all(wire, std::max<std::size_t>(size, 1), *lim);
    read_all(wire, 1, *lim);
    read_all(wire, 7, *lim);
  }
  return 0;
}
