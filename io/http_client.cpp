#include "io/http_client.hpp"

#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace strata::io {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct host_port {
  std::string host, port;
};

result<host_port> split_url(const std::string& url) {
  constexpr std::string_view scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return fail(errc::invalid_argument, "only http:// URLs are fetched from, not '", url, "'");
  std::string rest = url.substr(scheme.size());
  rest = rest.substr(0, rest.find('/'));
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return host_port{rest, "80"};
  return host_port{rest.substr(0, colon), rest.substr(colon + 1)};
}

net::awaitable<result<http_get_reply>> exchange(const http_get_options& o) {
  auto where = split_url(o.base_url);
  if (!where) co_return where.err();
  auto ex = co_await net::this_coro::executor;
  beast::tcp_stream stream(ex);
  try {
    stream.expires_after(o.timeout);  // one deadline for the whole exchange
    net::ip::tcp::resolver resolver(ex);
    auto endpoints = co_await resolver.async_resolve(where->host, where->port, net::use_awaitable);
    co_await stream.async_connect(endpoints, net::use_awaitable);
    http::request<http::empty_body> req{http::verb::get, o.target, 11};
    req.set(http::field::host, where->host);
    req.set(http::field::connection, "close");
    if (!o.api_key.empty()) req.set(http::field::authorization, "Bearer " + o.api_key);
    co_await http::async_write(stream, req, net::use_awaitable);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(o.max_body);
    co_await http::async_read(stream, buffer, parser, net::use_awaitable);
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    auto res = parser.release();
    co_return http_get_reply{static_cast<int>(res.result_int()), std::move(res.body())};
  } catch (const boost::system::system_error& e) {
    if (e.code() == http::error::body_limit) co_return fail(errc::limit_exceeded, "the body is longer than ", o.max_body, " bytes");
    if (e.code() == beast::error::timeout) co_return fail(errc::io_error, o.base_url, o.target, ": no answer within ", o.timeout.count(), " ms");
    co_return fail(errc::io_error, o.base_url, o.target, ": ", e.code().message());
  }
}

/// Runs the exchange and hands its outcome to `done`, whatever happens.
net::awaitable<void> run(http_get_options o, std::function<void(result<http_get_reply>)> done) {
  std::optional<result<http_get_reply>> r;
  try {
    r.emplace(co_await exchange(o));
  } catch (const std::exception& e) {
    r.emplace(fail(errc::io_error, o.base_url, o.target, ": ", e.what()));
  }
  done(std::move(*r));
}

}  // namespace

void http_get(net::any_io_executor ex, http_get_options opts, std::function<void(result<http_get_reply>)> done) {
  net::co_spawn(ex, run(std::move(opts), std::move(done)), net::detached);
}

}  // namespace strata::io
