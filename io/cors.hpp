#pragma once
// CORS: which web pages may call the API from a browser. The server's `cors_origins` lists the
// origins ("https://app.example", or "*" for any); a response to a listed origin names it in
// Access-Control-Allow-Origin, a preflight is answered here before any endpoint sees it, and the
// same list admits browsers to the WebSocket endpoint (websocket_session.hpp). Requests without
// an Origin header (curl, SDKs, servers) are not affected.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/http_types.hpp"

namespace strata::io {

/// Whether pages of `origin` (an Origin header's value) may use the API: it is in `allowed`
/// (compared without regard to case), or `allowed` holds "*".
bool origin_allowed(const std::vector<std::string>& allowed, std::string_view origin);

/// The Origin of `req` when it is allowed, else empty: the origin to name in the response.
std::string allowed_origin_of(const http_request& req, const std::vector<std::string>& allowed);

/// Lets pages of `origin` read the message: Access-Control-Allow-Origin names it, and Vary says
/// that the answer depends on the Origin (so that caches keep one per origin).
void allow_origin(http::fields& fields, std::string_view origin);

/// The answer to a CORS preflight, an OPTIONS request with Origin and
/// Access-Control-Request-Method: 204 with the methods and headers the API takes for an allowed
/// origin, 403 for another. Nothing when `req` is not a preflight.
std::optional<http_response> answer_preflight(const http_request& req, const std::vector<std::string>& allowed);

}  // namespace strata::io
