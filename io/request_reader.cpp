#include "io/request_reader.hpp"

#include <exception>

namespace strata::io {

namespace {

class read_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "strata.http.read"; }
  std::string message(int ev) const override {
    switch (static_cast<read_errc>(ev)) {
      case read_errc::trailers_too_large: return "request trailers too large";
      case read_errc::chunk_line_too_long: return "chunk-size line too long";
      case read_errc::unreadable: return "the request could not be parsed";
      case read_errc::unsupported_transfer_coding: return "unsupported transfer coding";
      case read_errc::transfer_encoding_with_content_length: return "both Transfer-Encoding and Content-Length";
      case read_errc::transfer_encoding_in_http10: return "Transfer-Encoding on an HTTP/1.0 request";
      case read_errc::missing_host: return "no Host header";
      case read_errc::repeated_host: return "more than one Host header";
    }
    return "unknown request read error";
  }
};

/// Bytes of every field's name and value.
std::uint64_t field_bytes(const http_request& req) {
  std::uint64_t n = 0;
  for (const auto& f : req) n += f.name_string().size() + f.value().size();
  return n;
}

/// Whether bytes the parser holds back in a chunked body start the last chunk, so that what
/// follows is the trailer section rather than one long chunk-size line. A chunk after another
/// starts with the CRLF that ended the previous chunk's data.
bool starts_last_chunk(std::string_view pending) {
  if (pending.starts_with("\r\n")) pending.remove_prefix(2);
  std::size_t zeros = 0;
  while (zeros < pending.size() && pending[zeros] == '0') ++zeros;
  if (zeros == 0) return false;
  if (zeros == pending.size()) return true;
  char c = pending[zeros];
  bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  return !hex;
}

/// Whether every Transfer-Encoding field of `req`, taken as one list, is the single coding
/// `chunked` (codings are case-insensitive; empty list elements do not count).
bool only_chunked(const http_request& req) {
  std::size_t codings = 0;
  bool chunked = false;
  for (const auto& f : req) {
    if (f.name() != http::field::transfer_encoding) continue;
    std::string_view list = f.value();
    while (!list.empty()) {
      auto comma = list.find(',');
      std::string_view item = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (item.empty()) continue;
      ++codings;
      chunked = boost::beast::iequals(item, "chunked");
    }
  }
  return codings == 1 && chunked;
}

}  // namespace

boost::system::error_code check_framing(const http_request& header) {
  bool has_te = header.count(http::field::transfer_encoding) > 0;
  if (has_te && header.version() < 11) return read_errc::transfer_encoding_in_http10;
  if (has_te && header.count(http::field::content_length) > 0) return read_errc::transfer_encoding_with_content_length;
  if (has_te && !only_chunked(header)) return read_errc::unsupported_transfer_coding;
  auto hosts = header.count(http::field::host);
  if (hosts > 1) return read_errc::repeated_host;
  if (hosts == 0 && header.version() >= 11) return read_errc::missing_host;
  return {};
}

const boost::system::error_category& read_category() noexcept {
  static const read_category_impl category;
  return category;
}

boost::system::error_code make_error_code(read_errc e) noexcept { return {static_cast<int>(e), read_category()}; }

request_limits limits_of(const http_options& opts) { return {opts.max_header, opts.max_body}; }

request_reader::request_reader(const request_limits& limits) : limits_(limits) {
  parser_.header_limit(limits_.max_header);
  parser_.body_limit(limits_.max_body);
  // One unit (the header, a chunk-size line, chunk data, the trailers) per call to Beast, so
  // that put() can bound each chunk-size line and the trailer section before Beast parses it.
  parser_.eager(false);
  chunk_header_cb_ = [this](std::uint64_t size, boost::beast::string_view ext, boost::system::error_code& ec) {
    on_chunk_header(size, ext, ec);
  };
  parser_.on_chunk_header(chunk_header_cb_);
}

void request_reader::on_chunk_header(std::uint64_t size, boost::beast::string_view ext, boost::system::error_code& ec) {
  // Beast has checked `size` against what is left of the body limit; the extensions count too.
  announced_ += size;
  extension_bytes_ += ext.size();
  if (parser_.get().body().size() + size + extension_bytes_ > limits_.max_body) {
    ec = http::error::body_limit;
    return;
  }
  // The last chunk: the trailer section comes next, parsed into the same fields as the header.
  if (size == 0) field_bytes_before_trailers_ = field_bytes(parser_.get());
}

std::size_t request_reader::put(std::string_view data, boost::system::error_code& ec) {
  ec = {};
  std::size_t used = 0;
  try {
    while (!parser_.is_done()) {
      std::string_view rest = data.substr(used);
      if (rest.empty()) {
        ec = http::error::need_more;
        break;
      }
      // Between two chunks the next unit is a chunk-size line, or the last chunk and the trailer
      // section; Beast sees no more of it than max_header, so neither can grow past that.
      bool between_chunks = parser_.is_header_done() && parser_.chunked() && announced_ == parser_.get().body().size();
      std::string_view slice = between_chunks ? rest.substr(0, limits_.max_header) : rest;
      std::size_t n = parser_.put(boost::asio::const_buffer(slice.data(), slice.size()), ec);
      used += n;
      if ((!ec || ec == http::error::need_more) && !framing_checked_ && parser_.is_header_done()) {
        // The header is whole and none of the body is read yet (the parser is not eager).
        framing_checked_ = true;
        if (auto bad = check_framing(parser_.get())) {
          ec = bad;
          break;
        }
      }
      if (ec == http::error::need_more && slice.size() < rest.size()) {
        ec = starts_last_chunk(rest) ? read_errc::trailers_too_large : read_errc::chunk_line_too_long;
      }
      if (ec) break;
      if (n == 0) {
        ec = http::error::need_more;
        break;
      }
    }
    if (!ec && parser_.is_done() && parser_.chunked()) {
      const auto& req = parser_.get();
      std::uint64_t trailer_bytes = field_bytes(req) - field_bytes_before_trailers_;
      if (req.body().size() + extension_bytes_ + trailer_bytes > limits_.max_body) ec = http::error::body_limit;
      // Trailers join the header's fields: a Host among them is one Host too many. (Beast itself
      // refuses a Transfer-Encoding or Content-Length there.)
      if (!ec) ec = check_framing(req);
    }
  } catch (const std::exception& e) {
    failure_ = e.what();
    ec = read_errc::unreadable;
  } catch (...) {
    failure_ = "unknown exception";
    ec = read_errc::unreadable;
  }
  return used;
}

}  // namespace strata::io
