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

}  // namespace

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
