#pragma once
// router: maps a request's method and path to the endpoint that answers it. Plain code, no I/O.

#include <atomic>
#include <string>
#include <vector>

#include "io/http_types.hpp"

namespace strata::api {

/// What the endpoints read about the server; owned by `strata serve`, read from any thread.
struct server_status {
  /// False while the model loads: /health answers 503.
  std::atomic<bool> ready{false};
  std::string model_id;
  std::vector<std::string> api_keys;
};

class router {
 public:
  explicit router(const server_status& status) : status_(status) {}

  io::http_response handle(const io::http_request& req, const io::request_context& ctx) const;

 private:
  io::http_response health(const io::http_request& req) const;
  const server_status& status_;
};

/// Compares in time that does not depend on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace strata::api
