// The checks on a WebSocket handshake before the server switches protocols: the key must be 16
// bytes of base64, and a browser's Origin must be in cors_origins. Raw handshakes over real
// connections.

#include <string>

#include <gtest/gtest.h>

#include "io/loopback.test.hpp"
#include "io/websocket_session.hpp"

namespace strata::io {
namespace {

using testing::loopback_server;
using testing::raw_exchange;
using namespace std::chrono_literals;

/// Accepts every request as a WebSocket that echoes its messages.
handler_result accept_websocket(http_request&, const request_context&) {
  websocket_accept accept;
  accept.on_message = [](websocket_message m) { m.outbox.send({std::move(m.text)}); };
  return accept;
}

const std::string good_key = "dGhlIHNhbXBsZSBub25jZQ==";  // RFC 6455's example

std::string handshake(const std::string& key_fields, const std::string& extra = {}) {
  return "GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Version: 13\r\n" +
         key_fields + extra + "\r\n";
}

std::string key_field(const std::string& key) { return "Sec-WebSocket-Key: " + key + "\r\n"; }

/// The server's status for a handshake, and whether it closed the connection after a refusal.
http::status status_of(const loopback_server& s, const std::string& raw, bool& closed) {
  auto r = raw_exchange(s.port(), raw, 0ms);
  if (!r.res) return http::status::unknown;
  if (r.res->result() != http::status::switching_protocols) {
    closed = raw_exchange(s.port(), raw).closed;
  }
  return r.res->result();
}

TEST(websocket_key, is_valid_only_as_16_bytes_of_base64) {
  EXPECT_TRUE(valid_websocket_key(good_key));
  EXPECT_TRUE(valid_websocket_key("AAAAAAAAAAAAAAAAAAAAAA=="));
  EXPECT_TRUE(valid_websocket_key("+/+/+/+/+/+/+/+/+/+/+w=="));
  EXPECT_FALSE(valid_websocket_key(""));
  EXPECT_FALSE(valid_websocket_key("abc"));
  EXPECT_FALSE(valid_websocket_key("AAAAAAAAAAAAAAAAAAAAAAAA"));   // 18 bytes, no padding
  EXPECT_FALSE(valid_websocket_key("AAAAAAAAAAAAAAAAAAAAA==="));   // 15 bytes and a stray '='
  EXPECT_FALSE(valid_websocket_key("AAAAAAAAAAAAAAAAAAAAAB=="));   // bits past the 16th byte
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZQ=== "));
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZ!=="));
  EXPECT_FALSE(valid_websocket_key("dGhlIHNhbXBsZSBub25jZQ"));
}

TEST(websocket_handshake, a_key_that_is_not_16_bytes_of_base64_is_refused_with_400) {
  loopback_server s({}, accept_websocket);
  for (std::string key : {"abc", "AAAAAAAAAAAAAAAAAAAAAAAA", "dGhlIHNhbXBsZSBub25jZ!==", "AAAAAAAAAAAAAAAAAAAAAB=="}) {
    SCOPED_TRACE(key);
    bool closed = false;
    EXPECT_EQ(status_of(s, handshake(key_field(key)), closed), http::status::bad_request);
    EXPECT_TRUE(closed);
  }
  bool closed = false;
  EXPECT_EQ(status_of(s, handshake(key_field(good_key) + key_field(good_key)), closed), http::status::bad_request);
  EXPECT_EQ(status_of(s, handshake(key_field(good_key)), closed), http::status::switching_protocols);
}

TEST(websocket_handshake, a_browser_origin_is_refused_with_403_when_no_origin_is_listed) {
  loopback_server s({}, accept_websocket);
  bool closed = false;
  EXPECT_EQ(status_of(s, handshake(key_field(good_key), "Origin: https://evil.example\r\n"), closed),
            http::status::forbidden);
  EXPECT_TRUE(closed);
  // Clients that are not browsers send no Origin and are not affected.
  EXPECT_EQ(status_of(s, handshake(key_field(good_key)), closed), http::status::switching_protocols);
}

TEST(websocket_handshake, only_listed_origins_may_open_a_socket) {
  http_options o;
  o.cors_origins = {"https://app.example", "http://localhost:3000"};
  loopback_server s(o, accept_websocket);
  bool closed = false;
  EXPECT_EQ(status_of(s, handshake(key_field(good_key), "Origin: https://app.example\r\n"), closed),
            http::status::switching_protocols);
  EXPECT_EQ(status_of(s, handshake(key_field(good_key), "Origin: http://localhost:3000\r\n"), closed),
            http::status::switching_protocols);
  for (std::string origin : {"https://evil.example", "http://app.example", "https://app.example:444", "null"}) {
    SCOPED_TRACE(origin);
    EXPECT_EQ(status_of(s, handshake(key_field(good_key), "Origin: " + origin + "\r\n"), closed),
              http::status::forbidden);
  }
  EXPECT_EQ(status_of(s, handshake(key_field(good_key), "Origin: https://app.example\r\nOrigin: https://evil.example\r\n"),
                      closed),
            http::status::forbidden);
}

TEST(websocket_handshake, a_star_admits_every_origin) {
  http_options o;
  o.cors_origins = {"*"};
  loopback_server s(o, accept_websocket);
  bool closed = false;
  EXPECT_EQ(status_of(s, handshake(key_field(good_key), "Origin: https://anywhere.example\r\n"), closed),
            http::status::switching_protocols);
}

}  // namespace
}  // namespace strata::io
