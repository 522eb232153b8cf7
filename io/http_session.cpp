#include "io/http_session.hpp"

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "io/cors.hpp"
#include "io/http_server.hpp"
#include "io/request_reader.hpp"
#include "io/websocket_session.hpp"
#include "src/common/log.hpp"

namespace strata::io {

namespace net = boost::asio;
namespace beast = boost::beast;
using namespace boost::asio::experimental::awaitable_operators;
constexpr auto nothrow = net::as_tuple(net::use_awaitable);

namespace {

/// The response owed to a client whose request could not be read, or nothing when the
/// connection just ended (closed, timed out, reset).
std::optional<http_response> reply_to_read_error(const beast::error_code& ec, unsigned version, std::uint64_t max_body) {
  if (ec == http::error::body_limit) {
    return make_error(version, http::status::payload_too_large,
                      "request body exceeds the limit of " + std::to_string(max_body) +
                          " bytes (chunk extensions and trailers included)",
                      "invalid_request_error", "body_too_large");
  }
  if (ec == read_errc::chunk_line_too_long) {
    return make_error(version, http::status::payload_too_large, "chunk-size line (with its extensions) too long",
                      "invalid_request_error", "chunk_extension_too_large");
  }
  if (ec == http::error::header_limit) {
    return make_error(version, http::status::request_header_fields_too_large, "request headers too large",
                      "invalid_request_error", "headers_too_large");
  }
  if (ec == read_errc::trailers_too_large) {
    return make_error(version, http::status::request_header_fields_too_large, "request trailers too large",
                      "invalid_request_error", "headers_too_large");
  }
  if (ec == read_errc::unsupported_transfer_coding) {
    return make_error(version, http::status::not_implemented,
                      "unsupported Transfer-Encoding: only \"chunked\" is accepted", "invalid_request_error",
                      "unsupported_transfer_encoding");
  }
  if (ec == read_errc::transfer_encoding_with_content_length || ec == read_errc::transfer_encoding_in_http10 ||
      ec == read_errc::missing_host || ec == read_errc::repeated_host) {
    return make_error(version, http::status::bad_request, "bad request framing: " + ec.message(),
                      "invalid_request_error", "bad_framing");
  }
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == beast::error::timeout ||
      ec == net::error::eof || ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::error::bad_descriptor) {
    return std::nullopt;
  }
  return make_error(version, http::status::bad_request, "malformed HTTP request: " + ec.message(),
                    "invalid_request_error", "bad_request");
}

/// The message of an exception caught as `e`.
std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

/// Writes the access-log line of a request that began at `t0`, with the tokens its handler reported.
void log_access(const request_context& ctx, std::string_view method, std::string_view target, int status,
                std::chrono::steady_clock::time_point t0, const request_usage& u) {
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  log::access(ctx.request_id, method, target, status, u.prompt_tokens, u.cached_tokens, u.generated_tokens, ms, u.key_name);
}

/// The response a whole-response part stands for.
http_response response_of(unsigned version, reply_part&& part) {
  auto res = make_json(version, static_cast<http::status>(part.status), std::move(part.data));
  if (part.status == 429) res.set(http::field::retry_after, "1");
  return res;
}

}  // namespace

http_session::http_session(std::shared_ptr<http_server> server, std::uint64_t id, beast::tcp_stream stream,
                           bool over_limit)
    : server_(std::move(server)), id_(id), stream_(std::move(stream)), over_limit_(over_limit) {
  beast::error_code ec;
  auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
}

void http_session::close_if_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->idle_ && !self->upgraded_) {
      beast::error_code ec;
      self->stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
      self->stream_.close();
    }
  });
}

void http_session::count(int status) const {
  if (server_->opts_.on_response) server_->opts_.on_response(status);
}

net::awaitable<void> http_session::write(http_response res) {
  responded_ = true;
  if (!cors_origin_.empty()) allow_origin(res, cors_origin_);
  stream_.expires_after(server_->opts_.write_timeout);
  co_await http::async_write(stream_, res, nothrow);
}

net::awaitable<void> http_session::run() {
  // The connection's boundary: whatever one connection throws ends that connection only.
  std::exception_ptr failure;
  try {
    co_await serve();
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    spdlog::error("connection {} ended by an exception: {}", remote_, what(failure));
    if (!responded_ && !upgraded_) {
      try {
        auto res = make_error(11, http::status::bad_request, "the request could not be processed",
                              "invalid_request_error", "bad_request");
        res.set(http::field::connection, "close");
        co_await write(std::move(res));
        count(400);
      } catch (...) {
        // Nothing more can be said on this connection; it closes below.
      }
    }
  }
  if (!upgraded_) {
    beast::error_code ec;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
    stream_.close();
  }
  server_->on_session_end(id_);
}

net::awaitable<void> http_session::serve() {
  if (over_limit_) {
    auto res = make_error(11, http::status::service_unavailable, "too many connections", "server_error",
                          "too_many_connections");
    res.set(http::field::connection, "close");
    res.set(http::field::retry_after, "1");
    count(503);
    co_await write(std::move(res));
    co_return;
  }
  bool first = true;
  while (co_await serve_one(first)) first = false;
}

net::awaitable<beast::error_code> http_session::read_request(request_reader& reader) {
  const auto& opts = server_->opts_;
  for (;;) {
    if (buffer_.size() > 0) {
      bool had_header = reader.header_done();
      beast::error_code ec;
      auto data = buffer_.data();
      buffer_.consume(reader.put(std::string_view(static_cast<const char*>(data.data()), data.size()), ec));
      if (!had_header && reader.header_done()) {
        idle_ = false;
        // A Content-Length over the body limit already failed the header (the parser checks it).
        stream_.expires_after(opts.header_timeout);
      }
      if (ec && ec != http::error::need_more) co_return ec;
      if (reader.done()) co_return beast::error_code{};
      // Without an error the reader took every byte; with need_more it waits for the rest.
    }
    auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(read_size), nothrow);
    if (ec) co_return ec;
    buffer_.commit(n);
  }
}

net::awaitable<bool> http_session::serve_one(bool first) {
  const auto& opts = server_->opts_;
  request_reader reader(limits_of(opts));

  idle_ = true;
  responded_ = false;
  cors_origin_.clear();
  if (server_->stopping()) co_return false;
  // A new connection gets header_timeout for its first request; a kept-alive one idle_timeout.
  stream_.expires_after(first ? opts.header_timeout : opts.idle_timeout);
  auto ec = co_await read_request(reader);
  idle_ = false;
  if (ec) {
    if (ec == read_errc::unreadable) spdlog::warn("connection {}: unreadable request: {}", remote_, reader.failure());
    unsigned version = reader.header_done() ? reader.get().version() : 11;
    if (auto res = reply_to_read_error(ec, version, opts.max_body)) {
      // A refused request may have left bytes unread: the connection cannot go on.
      res->set(http::field::connection, "close");
      count(res->result_int());
      co_await write(std::move(*res));
    }
    co_return false;
  }

  http_request req = reader.release();
  request_usage usage;
  request_context ctx{log::new_request_id(), remote_, stream_.get_executor(), {}, &usage.key_name};
  cors_origin_ = allowed_origin_of(req, opts.cors_origins);
  auto t0 = std::chrono::steady_clock::now();
  handler_result result;
  try {
    result = respond(req, ctx);
    while (auto* pending = std::get_if<async_reply>(&result)) {
      auto run = std::move(pending->run);
      result = co_await run();
    }
  } catch (...) {
    spdlog::error("[{}] handler failed: {}", ctx.request_id, what(std::current_exception()));
    result = make_error(req.version(), http::status::internal_server_error, "internal error", "server_error");
  }
  bool keep = req.keep_alive() && !server_->stopping();
  int status = 0;
  if (auto* res = std::get_if<http_response>(&result)) {
    keep = keep && res->keep_alive();
    res->keep_alive(keep);
    res->set("x-request-id", ctx.request_id);
    status = static_cast<int>(res->result_int());
    co_await write(std::move(*res));
  } else if (auto* sr = std::get_if<stream_reply>(&result)) {
    auto [kept, st] = co_await write_stream(*sr, req, ctx, keep, usage);
    keep = kept;
    status = st;
    if (status == 499) {
      log_access(ctx, req.method_string(), req.target(), status, t0, usage);
      co_return false;
    }
  } else if (auto* dr = std::get_if<deferred_reply>(&result)) {
    bool timed_out = false;
    auto outcome = co_await (dr->queue->next(dr->timeout, timed_out) || watch_peer());
    if (outcome.index() == 1) {
      // The client left before its answer: the request stops at the scheduler's next step.
      spdlog::info("[{}] client went away before the response", ctx.request_id);
      dr->queue->cancel();
      log_access(ctx, req.method_string(), req.target(), 499, t0, usage);
      co_return false;
    }
    auto part = std::get<0>(std::move(outcome));
    http_response res;
    if (part && part->status != 0) {
      usage += part->usage;
      res = response_of(req.version(), std::move(*part));
    } else {
      dr->queue->cancel();
      res = make_error(req.version(), http::status::gateway_timeout, "the response was not ready in time",
                       "server_error", "timeout");
    }
    keep = keep && res.keep_alive();
    res.keep_alive(keep);
    res.set("x-request-id", ctx.request_id);
    status = static_cast<int>(res.result_int());
    co_await write(std::move(res));
  } else {
    // The connection becomes a WebSocket; the session ends here and the socket moves on. Its line
    // is written when the socket closes, with the tokens of every request made over it.
    count(101);
    upgraded_ = true;
    std::string method(req.method_string()), target(req.target());
    usage = co_await run_websocket(std::move(stream_), std::move(req), std::get<websocket_accept>(std::move(result)),
                                   ctx.request_id);
    log_access(ctx, method, target, 101, t0, usage);
    co_return false;
  }
  log_access(ctx, std::string(req.method_string()), std::string(req.target()), status, t0, usage);
  count(status);
  co_return keep && !server_->stopping();
}

handler_result http_session::respond(http_request& req, const request_context& ctx) {
  const auto& origins = server_->opts_.cors_origins;
  if (auto preflight = answer_preflight(req, origins)) return std::move(*preflight);
  auto result = server_->handler_(req, ctx);
  if (std::holds_alternative<websocket_accept>(result)) {
    if (auto refusal = refuse_upgrade(req, origins)) return std::move(*refusal);
  }
  return result;
}

net::awaitable<std::pair<bool, int>> http_session::write_stream(stream_reply& sr, const http_request& req,
                                                               const request_context& ctx, bool keep, request_usage& usage) {
  // Nothing is written before the first part: a request the scheduler refuses is answered with
  // its status (429), not with a 200 and an error inside the stream.
  bool timed_out = false;
  auto first = co_await (sr.queue->next(std::chrono::hours(24), timed_out) || watch_peer());
  if (first.index() == 1 || !std::get<0>(first)) {
    spdlog::info("[{}] client went away before the stream began", ctx.request_id);
    sr.queue->cancel();
    co_return std::pair{false, 499};
  }
  reply_part part = *std::get<0>(std::move(first));
  if (part.status != 0) {
    usage += part.usage;
    auto res = response_of(req.version(), std::move(part));
    keep = keep && res.keep_alive();
    res.keep_alive(keep);
    res.set("x-request-id", ctx.request_id);
    const int status = static_cast<int>(res.result_int());
    co_await write(std::move(res));
    co_return std::pair{keep, status};
  }
  http::response<http::empty_body> head{sr.head.result(), sr.head.version()};
  for (const auto& field : sr.head) head.set(field.name_string(), field.value());
  head.set("x-request-id", ctx.request_id);
  if (!cors_origin_.empty()) allow_origin(head, cors_origin_);
  // HTTP/1.0 has no chunked coding: the body is the parts as they are, ended by closing.
  const bool chunked = head.version() >= 11;
  if (!chunked) keep = false;
  head.erase(http::field::content_length);
  head.keep_alive(keep);
  head.chunked(chunked);
  const int status = static_cast<int>(head.result_int());
  http::response_serializer<http::empty_body> serializer{head};
  responded_ = true;
  stream_.expires_after(server_->opts_.write_timeout);
  auto [ec, n] = co_await http::async_write_header(stream_, serializer, nothrow);
  if (!ec) {
    // A client who leaves is noticed at once, even while its request waits in the queue and
    // nothing is written to it.
    auto outcome = co_await (write_chunks(sr, std::move(part), chunked, usage) || watch_peer());
    ec = outcome.index() == 0 ? std::get<0>(outcome) : beast::error_code(net::error::eof);
  }
  if (ec) {
    if (ec == net::error::connection_aborted) {
      spdlog::info("[{}] stream cut by its producer; dropping the connection", ctx.request_id);
    } else {
      spdlog::info("[{}] client went away mid-stream: {}", ctx.request_id, ec.message());
    }
    sr.queue->cancel();
    co_return std::pair{false, status};
  }
  if (!chunked) co_return std::pair{false, status};
  stream_.expires_after(server_->opts_.write_timeout);
  std::tie(ec, n) = co_await net::async_write(stream_, http::make_chunk_last(), nothrow);
  if (ec) sr.queue->cancel();
  co_return std::pair{!ec && keep, status};
}

net::awaitable<beast::error_code> http_session::write_chunks(stream_reply& sr, reply_part first, bool chunked,
                                                             request_usage& usage) {
  std::optional<reply_part> part = std::move(first);
  for (;;) {
    bool timed_out = false;
    if (!part) part = co_await sr.queue->next(sr.keepalive, timed_out);
    if (!part && !timed_out) co_return beast::error_code{};
    if (part) usage += part->usage;
    if (part && part->abort) co_return beast::error_code(net::error::connection_aborted);
    const std::string& data = part ? part->data : sr.keepalive_data;
    if (!data.empty()) {
      // A reader that takes longer than write_timeout for one chunk is treated as gone.
      stream_.expires_after(server_->opts_.write_timeout);
      auto [ec, n] = chunked ? co_await net::async_write(stream_, http::make_chunk(net::buffer(data)), nothrow)
                             : co_await net::async_write(stream_, net::buffer(data), nothrow);
      if (ec) co_return ec;
    }
    part.reset();
  }
}

net::awaitable<void> http_session::watch_peer() {
  while (buffer_.size() < read_size) {
    // The socket itself, not the tcp_stream: the stream's timeout would close a connection whose
    // answer is only slow to come.
    auto [ec, n] = co_await stream_.socket().async_read_some(buffer_.prepare(read_size), nothrow);
    // End of stream or reset: the client is gone. (Cancelled: the response came first, and `||`
    // has taken the wait's result already.)
    if (ec) co_return;
    buffer_.commit(n);
  }
  net::steady_timer never(stream_.get_executor(), net::steady_timer::time_point::max());
  co_await never.async_wait(nothrow);
}

}  // namespace strata::io
