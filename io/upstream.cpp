#include "io/upstream.hpp"

#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace strata::io {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
constexpr auto nothrow = net::as_tuple(net::use_awaitable);

std::optional<upstream_address> parse_http_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (!url.starts_with(scheme)) return std::nullopt;
  url.remove_prefix(scheme.size());
  if (url.ends_with('/')) url.remove_suffix(1);
  if (url.empty() || url.find('/') != std::string_view::npos) return std::nullopt;
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos) return upstream_address{std::string(url), "80"};
  std::string_view port = url.substr(colon + 1);
  if (colon == 0 || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  if (std::stoi(std::string(port)) > 65535 || std::stoi(std::string(port)) == 0) return std::nullopt;
  return upstream_address{std::string(url.substr(0, colon)), std::string(port)};
}

namespace {

/// Resolves and connects `stream` to `to` within its current deadline.
net::awaitable<beast::error_code> connect(beast::tcp_stream& stream, const upstream_address& to) {
  net::ip::tcp::resolver resolver(stream.get_executor());
  auto [rec, endpoints] = co_await resolver.async_resolve(to.host, to.port, nothrow);
  if (rec) co_return rec;
  auto [ec, ep] = co_await stream.async_connect(endpoints, nothrow);
  co_return ec;
}

}  // namespace

upstream_call::upstream_call(net::any_io_executor ex) : stream_(std::move(ex)) {
  parser_.body_limit(boost::none);  // a stream is as long as the replica makes it
}

net::awaitable<beast::error_code> upstream_call::start(const upstream_address& to, http_request req,
                                                        std::chrono::milliseconds connect_timeout,
                                                        std::chrono::milliseconds head_timeout) {
  stream_.expires_after(connect_timeout);
  if (auto ec = co_await connect(stream_, to)) co_return ec;
  req.set(http::field::host, to.host + ":" + to.port);
  req.keep_alive(false);
  req.prepare_payload();
  stream_.expires_after(head_timeout);
  auto [wec, wn] = co_await http::async_write(stream_, req, nothrow);
  if (wec) co_return wec;
  auto [ec, n] = co_await http::async_read_header(stream_, buffer_, parser_, nothrow);
  co_return ec;
}

net::awaitable<beast::error_code> upstream_call::read_some(std::string& out, std::chrono::milliseconds idle) {
  out.clear();
  std::array<char, 16 * 1024> buf;
  while (out.empty() && !parser_.is_done()) {
    parser_.get().body().data = buf.data();
    parser_.get().body().size = buf.size();
    stream_.expires_after(idle);
    auto [ec, n] = co_await http::async_read_some(stream_, buffer_, parser_, nothrow);
    if (ec && ec != http::error::need_buffer) co_return ec;
    out.append(buf.data(), buf.size() - parser_.get().body().size);
  }
  co_return beast::error_code{};
}

net::awaitable<beast::error_code> upstream_call::read_rest(std::string& body, std::chrono::milliseconds idle) {
  std::string piece;
  while (!parser_.is_done()) {
    if (auto ec = co_await read_some(piece, idle)) co_return ec;
    body += piece;
  }
  co_return beast::error_code{};
}

void upstream_call::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
}

net::awaitable<std::pair<beast::error_code, std::shared_ptr<websocket_client>>> connect_websocket(
    net::any_io_executor ex, const upstream_address& to, std::string target, http::fields headers,
    std::chrono::milliseconds timeout) {
  auto ws = std::make_shared<websocket_client>(std::move(ex));
  auto& tcp = beast::get_lowest_layer(*ws);
  tcp.expires_after(timeout);
  if (auto ec = co_await connect(tcp, to)) co_return std::pair{ec, nullptr};
  ws->set_option(websocket::stream_base::decorator([headers = std::move(headers)](websocket::request_type& req) {
    for (const auto& f : headers) req.set(f.name_string(), f.value());
  }));
  auto [ec] = co_await ws->async_handshake(to.host + ":" + to.port, target, nothrow);
  if (ec) co_return std::pair{ec, nullptr};
  tcp.expires_never();
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
  ws->read_message_max(64ull << 20);
  co_return std::pair{beast::error_code{}, ws};
}

}  // namespace strata::io
