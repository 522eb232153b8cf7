#pragma once
// websocket_session: one upgraded connection. Owns the WebSocket stream and its outbox; a reader
// loop hands text messages to the API's handler, a writer loop sends what the outbox yields.

#include <memory>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "io/http_types.hpp"

namespace strata::io {

/// Runs the upgraded connection until either side closes it. `req` is the upgrade request.
boost::asio::awaitable<void> run_websocket(boost::beast::tcp_stream stream, http_request req, websocket_accept accept,
                                           std::string request_id);

}  // namespace strata::io
