#pragma once
// request_reader: one HTTP/1.1 request from bytes as they arrive, under the server's limits.
// Owns Beast's parser; no Asio, so the session and the HTTP fuzzer drive the same code.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include <boost/beast/http.hpp>
#include <boost/system/error_code.hpp>

#include "io/http_types.hpp"

namespace strata::io {

/// Why a request_reader refused a request, beyond Beast's own `http::error` codes.
enum class read_errc {
  /// The trailer section of a chunked body is larger than the header limit (431).
  trailers_too_large = 1,
  /// One chunk-size line, its extensions included, is larger than the header limit (413).
  chunk_line_too_long,
  /// The parser threw on the bytes; the request cannot be read (400).
  unreadable,
  /// A Transfer-Encoding other than exactly `chunked` (gzip, "gzip, chunked", ...): the body's
  /// length cannot be known without a coding the server does not implement (501).
  unsupported_transfer_coding,
  /// Both Transfer-Encoding and Content-Length: two framings that a proxy in front may read
  /// differently, the ground of request smuggling (400).
  transfer_encoding_with_content_length,
  /// Transfer-Encoding on an HTTP/1.0 request, which has no transfer codings (400).
  transfer_encoding_in_http10,
  /// An HTTP/1.1 request without a Host field (400).
  missing_host,
  /// More than one Host field (400).
  repeated_host,
};

const boost::system::error_category& read_category() noexcept;
boost::system::error_code make_error_code(read_errc e) noexcept;

/// The limits a request is read under; every reader the server makes uses these.
struct request_limits {
  /// The request line and header fields together, and apart from that the trailer section and
  /// any one chunk-size line.
  std::uint32_t max_header = 16 * 1024;
  /// Decoded body bytes plus every chunk extension and trailer field.
  std::uint64_t max_body = 8ull << 20;
};

/// The limits of a server with these options.
request_limits limits_of(const http_options& opts);

/// Whether a complete request header frames its message in a way the server accepts: no
/// Transfer-Encoding but exactly `chunked` (and none on HTTP/1.0), never with a Content-Length,
/// and one Host field (required on HTTP/1.1). Beast's parser takes the rest of these requests
/// and reads their bodies in a way another server on the path may not.
boost::system::error_code check_framing(const http_request& header);

/// Reads one request. Beast's parser bounds the header by `max_header` and the decoded body by
/// `max_body`, but nothing bounds the framing of a chunked body: a chunk-size line and the
/// trailer section wait in the caller's buffer until complete, however long, and a trailer field
/// over 64 KiB makes the fields container throw. This reader bounds both by `max_header`, counts
/// extensions and trailers against `max_body`, turns any exception into an error code, and
/// refuses a header that check_framing() refuses before any of its body is read.
///
/// Feed it as Beast's parser: put() the bytes not yet consumed, followed by new ones, until
/// done(); on `http::error::need_more` add bytes and put again, on any other error give up.
class request_reader {
 public:
  explicit request_reader(const request_limits& limits);
  request_reader(const request_reader&) = delete;
  request_reader& operator=(const request_reader&) = delete;

  /// Parses what it can of `data`; returns how many bytes it consumed (the rest must come again).
  /// What the parser throws becomes `read_errc::unreadable`.
  std::size_t put(std::string_view data, boost::system::error_code& ec);

  bool header_done() const { return parser_.is_header_done(); }
  bool done() const { return parser_.is_done(); }
  /// The request so far; complete once done().
  const http_request& get() const { return parser_.get(); }
  http_request release() { return parser_.release(); }
  /// What the parser threw, after `read_errc::unreadable`.
  const std::string& failure() const { return failure_; }

 private:
  void on_chunk_header(std::uint64_t size, boost::beast::string_view extensions, boost::system::error_code& ec);

  request_limits limits_;
  http::request_parser<http::string_body> parser_;
  // Beast keeps a reference to this callback, so the reader neither copies nor moves.
  std::function<void(std::uint64_t, boost::beast::string_view, boost::system::error_code&)> chunk_header_cb_;
  std::uint64_t announced_ = 0;  // the sizes of the chunks begun so far
  std::uint64_t extension_bytes_ = 0;
  std::uint64_t field_bytes_before_trailers_ = 0;
  bool framing_checked_ = false;
  std::string failure_;
};

}  // namespace strata::io

template <>
struct boost::system::is_error_code_enum<strata::io::read_errc> : std::true_type {};
