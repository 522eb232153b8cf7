#pragma once
// http_client: one GET to another strata replica (a KV block by value), on Beast, with a deadline
// over the whole exchange (resolve, connect, write, read) and a cap on the body. Nothing waits on
// a thread: the answer comes back through a callback on the executor given.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "src/common/error.hpp"

namespace strata::io {

struct http_get_options {
  /// The replica's base URL, "http://host:port" (a path after it is ignored).
  std::string base_url;
  /// The request target, e.g. "/internal/kv/<hash>".
  std::string target;
  /// Sent as "Authorization: Bearer <key>" when not empty.
  std::string api_key;
  std::chrono::milliseconds timeout{2000};
  /// A longer body is refused (limit_exceeded), read no further.
  std::size_t max_body = 64u << 20;
};

/// What came back: the status and the body (any status: the caller decides).
struct http_get_reply {
  int status = 0;
  std::string body;
};

/// Sends the GET and calls `done` once on `ex`: the reply, or an error (a bad URL, a refused or
/// timed-out connection, a body past the cap).
void http_get(boost::asio::any_io_executor ex, http_get_options opts, std::function<void(result<http_get_reply>)> done);

}  // namespace strata::io
