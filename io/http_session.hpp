#pragma once
// http_session: one connection. Owns the socket and the read buffer; reads requests through a
// request_reader and serves them one after another (keep-alive) on its own strand. Only its
// server creates or stops it.

#include <atomic>
#include <cstdint>
#include <memory>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "io/http_types.hpp"

namespace strata::io {

class http_server;
class request_reader;

class http_session : public std::enable_shared_from_this<http_session> {
 public:
  http_session(std::shared_ptr<http_server> server, std::uint64_t id, boost::beast::tcp_stream stream,
               bool over_limit);

  /// Runs the session to its end.
  boost::asio::awaitable<void> run();
  /// Closes the connection now if it waits for a request; otherwise after the current response.
  void close_if_idle();
  boost::beast::tcp_stream::executor_type executor() { return stream_.get_executor(); }

 private:
  /// Serves requests until the connection ends; run() catches what it throws.
  boost::asio::awaitable<void> serve();
  boost::asio::awaitable<bool> serve_one(bool first);
  /// The reply to a complete request: a CORS preflight is answered here, and an upgrade the
  /// endpoint accepts is refused here when its handshake must not go on.
  handler_result respond(http_request& req, const request_context& ctx);
  /// Feeds the reader from the buffer and the socket until the request is complete or refused.
  boost::asio::awaitable<boost::system::error_code> read_request(request_reader& reader);
  /// Reports a response status to the server options' on_response hook.
  void count(int status) const;
  boost::asio::awaitable<void> write(http_response res);
  /// Writes a streamed response (or the whole response its first part stands for); returns whether
  /// the connection may be kept, and the status sent (499: the client left before anything was).
  boost::asio::awaitable<std::pair<bool, int>> write_stream(stream_reply& sr, const http_request& req,
                                                            const request_context& ctx, bool keep, request_usage& usage);
  /// Writes `first` and every later part of the stream (and keep-alives between them) as a chunk
  /// until it ends, adding the usage the parts carry.
  boost::asio::awaitable<boost::system::error_code> write_chunks(stream_reply& sr, reply_part first, bool chunked,
                                                                 request_usage& usage);
  /// While a response is pending, reads the socket so that a client who leaves is noticed at once
  /// (not at the next write): completes when the peer has closed or the socket failed. Bytes that
  /// arrive meanwhile (a pipelined request) go to the read buffer for the next request; past
  /// read_size of them it stops reading and only waits. Run it against the wait with `||`, which
  /// cancels it when the response comes first.
  boost::asio::awaitable<void> watch_peer();

  std::shared_ptr<http_server> server_;
  std::uint64_t id_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::string remote_;
  bool over_limit_;
  bool idle_ = true;        // touched only on the strand
  bool responded_ = false;  // a response to the current request has begun
  bool upgraded_ = false;   // the socket moved to a WebSocket session
  std::string cors_origin_;  // the current request's allowed Origin, named in its response
  /// Bytes asked of the socket per read.
  static constexpr std::size_t read_size = 64 * 1024;
};

}  // namespace strata::io
