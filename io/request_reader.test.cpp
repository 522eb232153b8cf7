#include "io/request_reader.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "io/chunked_request.test.hpp"

namespace strata::io {
namespace {

struct fed {
  boost::system::error_code ec;
  /// The most bytes the caller had to keep for the reader at once.
  std::size_t most_held = 0;
};

/// Feeds `raw` to the reader `step` bytes at a time, as the session does from its socket: the
/// bytes not consumed come again in front of the new ones. Stops when the request is complete or
/// refused; `ec` is need_more when the bytes ran out first.
fed feed(request_reader& reader, std::string_view raw, std::size_t step) {
  fed out;
  std::string held;
  for (std::size_t at = 0; at < raw.size();) {
    auto n = std::min(step, raw.size() - at);
    held.append(raw.substr(at, n));
    at += n;
    out.most_held = std::max(out.most_held, held.size());
    held.erase(0, reader.put(held, out.ec));
    if (reader.done() || (out.ec && out.ec != http::error::need_more)) return out;
  }
  if (!reader.done()) out.ec = http::error::need_more;
  return out;
}

using testing::chunked_request;

/// Feeds `request` a byte, 256 bytes and all of it at a time: each way the reader refuses it
/// with `want`, holding no more than the header limit plus one step.
void expect_refused_however_it_arrives(const request_limits& limits, const std::string& request, read_errc want) {
  for (std::size_t step : {std::size_t{1}, std::size_t{256}, request.size()}) {
    request_reader reader(limits);
    auto r = feed(reader, request, step);
    EXPECT_EQ(r.ec, want) << "step " << step;
    if (step < limits.max_header) {
      EXPECT_LE(r.most_held, limits.max_header + step) << "step " << step;
    }
  }
}

TEST(request_reader, reads_a_chunked_request_with_extensions_and_trailers_fed_a_byte_at_a_time) {
  request_reader reader({});
  auto r = feed(reader, chunked_request("hello world", 4, ";a=b", "x-sum: 42\r\n"), 1);
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(reader.done());
  EXPECT_EQ(reader.get().body(), "hello world");
  EXPECT_EQ(reader.get()["x-sum"], "42");
}

TEST(request_reader, leaves_the_next_pipelined_request_unconsumed) {
  request_reader reader({});
  std::string first = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string both = first + "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  boost::system::error_code ec;
  EXPECT_EQ(reader.put(both, ec), first.size());
  EXPECT_FALSE(ec);
  EXPECT_TRUE(reader.done());
  EXPECT_EQ(reader.get().target(), "/a");
}

TEST(request_reader, refuses_a_chunk_line_over_the_header_limit_however_it_arrives) {
  request_limits limits{1024, 1 << 20};
  const std::string request = chunked_request("hello", 5, ";e=" + std::string(100'000, 'a'), "");
  expect_refused_however_it_arrives(limits, request, read_errc::chunk_line_too_long);
}

TEST(request_reader, refuses_a_trailer_section_over_the_header_limit_however_it_arrives) {
  request_limits limits{1024, 1 << 20};
  const std::string request = chunked_request("hello", 5, "", "x-pad: " + std::string(100'000, 'a') + "\r\n");
  expect_refused_however_it_arrives(limits, request, read_errc::trailers_too_large);
}

TEST(request_reader, takes_a_trailer_section_just_within_the_header_limit_and_not_a_byte_more) {
  request_limits limits{1024, 1 << 20};
  // The CRLF closing the chunk's data, "0\r\n", "x-pad: " and the value, its CRLF, the final CRLF.
  auto request_with = [](std::size_t value) {
    return chunked_request("hello", 5, "", "x-pad: " + std::string(value, 'a') + "\r\n");
  };
  const std::size_t fits = 1024 - 2 - 3 - 7 - 2 - 2;
  for (std::size_t step : {std::size_t{1}, std::size_t{256}, std::size_t{1} << 20}) {
    request_reader within(limits);
    auto r = feed(within, request_with(fits), step);
    EXPECT_FALSE(r.ec) << "step " << step << ": " << r.ec.message();
    EXPECT_TRUE(within.done());
    request_reader over(limits);
    EXPECT_EQ(feed(over, request_with(fits + 1), step).ec, read_errc::trailers_too_large) << "step " << step;
  }
}

TEST(request_reader, counts_extensions_against_the_body_limit_to_the_byte) {
  // Ten 10-byte chunks and the last chunk, each with a 6-byte extension: 100 + 11 * 6 bytes.
  const std::string body(100, 'b');
  const std::string request = chunked_request(body, 10, ";k=vvv", "");
  {
    request_reader reader({16 * 1024, 166});
    auto r = feed(reader, request, 7);
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_TRUE(reader.done());
  }
  {
    request_reader reader({16 * 1024, 165});
    EXPECT_EQ(feed(reader, request, 7).ec, http::error::body_limit);
  }
}

TEST(request_reader, counts_trailer_fields_against_the_body_limit_to_the_byte) {
  // The body (5 bytes) and the trailer's name and value (5 + 10 bytes).
  const std::string request = chunked_request("hello", 5, "", "x-pad: aaaaaaaaaa\r\n");
  {
    request_reader reader({16 * 1024, 20});
    auto r = feed(reader, request, request.size());
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_TRUE(reader.done());
  }
  {
    request_reader reader({16 * 1024, 19});
    EXPECT_EQ(feed(reader, request, request.size()).ec, http::error::body_limit);
  }
}

TEST(request_reader, turns_what_the_parser_throws_into_an_error) {
  // A field value over 64 KiB is more than Beast's fields container holds; it throws on insert.
  request_reader reader({1 << 20, 1 << 20});
  auto r = feed(reader, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(70'000, 'a') + "\r\n\r\n", 1 << 20);
  EXPECT_EQ(r.ec, read_errc::unreadable);
  EXPECT_FALSE(reader.failure().empty());
}

TEST(request_reader, refuses_a_header_with_two_framings_before_reading_its_body_however_it_arrives) {
  struct refused {
    std::string header;
    read_errc why;
  };
  const refused cases[] = {
      {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", read_errc::unsupported_transfer_coding},
      {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", read_errc::unsupported_transfer_coding},
      {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", read_errc::unsupported_transfer_coding},
      {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n",
       read_errc::transfer_encoding_with_content_length},
      {"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", read_errc::transfer_encoding_in_http10},
      {"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n", read_errc::missing_host},
      {"POST /x HTTP/1.1\r\nHost: a\r\nHost: a\r\nContent-Length: 5\r\n\r\n", read_errc::repeated_host},
  };
  for (const auto& c : cases) {
    for (std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{1} << 20}) {
      request_reader reader({});
      // The body that follows is never looked at: its bytes stay with the caller.
      std::string raw = c.header + "5\r\nhello\r\n0\r\n\r\n";
      auto r = feed(reader, raw, step);
      EXPECT_EQ(r.ec, c.why) << c.header << "step " << step << ": " << r.ec.message();
      EXPECT_TRUE(reader.get().body().empty()) << c.header;
    }
  }
}

TEST(request_reader, refuses_a_host_field_among_the_trailers) {
  request_reader reader({});
  EXPECT_EQ(feed(reader, chunked_request("hello", 5, "", "Host: y\r\n"), 1).ec, read_errc::repeated_host);
}

TEST(request_reader, takes_its_limits_from_the_server_options) {
  http_options opts;
  opts.max_header = 1234;
  opts.max_body = 5678;
  auto limits = limits_of(opts);
  EXPECT_EQ(limits.max_header, 1234u);
  EXPECT_EQ(limits.max_body, 5678u);
}

}  // namespace
}  // namespace strata::io
