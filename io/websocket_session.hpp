#pragma once
// websocket_session: one upgraded connection. Owns the WebSocket stream and its outbox (a bounded
// reply_queue); a reader loop hands text messages to the API's handler, a writer loop sends what
// the outbox yields. A client that stops reading pauses its own streams, then is closed (1013).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "io/http_types.hpp"

namespace strata::io {

/// Whether `key` is a Sec-WebSocket-Key as RFC 6455 has it: 16 bytes in base64, that is 22
/// base64 characters and "==".
bool valid_websocket_key(std::string_view key);

/// Why an upgrade request that an endpoint would accept must be refused, as the response to send
/// instead of 101: 400 for a Sec-WebSocket-Key that is missing, repeated or not 16 bytes of
/// base64; 403 for a browser (an Origin header) whose origin is not in `allowed_origins`.
/// Nothing when the handshake may go on.
std::optional<http_response> refuse_upgrade(const http_request& req, const std::vector<std::string>& allowed_origins);

/// Runs the upgraded connection until either side closes it. `req` is the upgrade request.
/// Returns the tokens of every request made over it, for its access-log line.
boost::asio::awaitable<request_usage> run_websocket(boost::beast::tcp_stream stream, http_request req, websocket_accept accept,
                                           std::string request_id);

}  // namespace strata::io
