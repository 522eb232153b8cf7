#pragma once
// The HTTP vocabulary shared by the server, its sessions and the API's handlers.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <boost/beast/http.hpp>

namespace strata::io {

namespace http = boost::beast::http;
using http_request = http::request<http::string_body>;
using http_response = http::response<http::string_body>;

struct http_options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::uint64_t max_body = 8ull << 20;
  std::uint32_t max_header = 16 * 1024;
  int max_connections = 10'000;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{30'000};
};

/// What a handler learns about the request beyond the message itself.
struct request_context {
  std::string request_id;
  std::string remote;
};

/// Turns one complete request into a response. Runs on the connection's strand: must not block.
using request_handler = std::function<http_response(const http_request&, const request_context&)>;

/// An OpenAI-shaped error body: {"error":{"message","type","param","code"}}.
http_response make_error(unsigned version, http::status status, std::string_view message,
                         std::string_view type, std::string_view code = {}, std::string_view param = {});

/// A JSON response with the given body.
http_response make_json(unsigned version, http::status status, std::string body);

}  // namespace strata::io
