// GET /internal/kv/{hash}: one block this replica holds, by value, for another replica that lacks
// it (actors/kv_fetch). The scheduler copies it out of RAM (or asks the SSD tier) and hands back
// the wire record: the SSD record header (checksums, model fingerprint, KV format, version) and
// the payload. One block at most: the body is bounded by the block size, and a record past
// max_record_bytes is refused rather than sent.

#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "server/api/completions_service.hpp"

namespace strata::api {
namespace {

namespace net = boost::asio;
using record = std::optional<std::vector<std::byte>>;

/// The most bytes one record may have (a block of the largest models is a few MiB).
constexpr std::size_t max_record_bytes = 64u << 20;

/// The hash in a 64-hex-digit string (kv::block_hash::hex's spelling), or nothing.
std::optional<kv::block_hash> parse_hash(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  kv::block_hash h;
  for (std::size_t i = 0; i < 64; i += 2) {
    auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const std::size_t byte = i / 2;  // bytes in digest order, 8 per word, little-endian
    h.w[byte / 8] |= static_cast<std::uint64_t>(hi * 16 + lo) << (8 * (byte % 8));
  }
  return h;
}

/// Asks the scheduler for the record and resumes on the connection's executor with it.
net::awaitable<record> ask(sched::scheduler_address scheduler, kv::block_hash h, bool snapshot) {
  auto initiate = [scheduler, h, snapshot](auto handler) {
    using handler_t = decltype(handler);
    auto held = std::make_shared<handler_t>(std::move(handler));
    sched::export_done done = [held](record r) {
      auto ex = net::get_associated_executor(*held);
      net::dispatch(ex, [held, r = std::move(r)]() mutable { std::move (*held)(std::move(r)); });
    };
    if (!scheduler.tell(sched::export_block{h, snapshot, done})) done(std::nullopt);
  };
  return net::async_initiate<const net::use_awaitable_t<>&, void(record)>(std::move(initiate), net::use_awaitable);
}

net::awaitable<io::handler_result> serve(sched::scheduler_address scheduler, kv::block_hash h, bool snapshot, unsigned version) {
  record r = co_await ask(std::move(scheduler), h, snapshot);
  if (!r) {
    co_return io::make_error(version, io::http::status::not_found, "this replica does not hold " + h.hex(), "not_found_error", "kv_not_held");
  }
  if (r->size() > max_record_bytes) {
    co_return io::make_error(version, io::http::status::insufficient_storage,
                             "the record of " + h.hex() + " has " + std::to_string(r->size()) + " bytes, past the cap of " +
                                 std::to_string(max_record_bytes),
                             "server_error", "record_too_large");
  }
  io::http_response res{io::http::status::ok, version};
  res.set(io::http::field::content_type, "application/octet-stream");
  res.body().assign(reinterpret_cast<const char*>(r->data()), r->size());
  res.prepare_payload();
  co_return res;
}

}  // namespace

io::handler_result completions_service::kv_record(io::http_request& req, const io::request_context&) {
  const unsigned version = req.version();
  std::string_view target = req.target();
  constexpr std::string_view prefix = "/internal/kv/";
  std::string_view rest = target.substr(std::min(prefix.size(), target.size()));
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) query = rest.substr(q + 1), rest = rest.substr(0, q);
  const auto h = parse_hash(rest);
  if (!h) {
    return io::make_error(version, io::http::status::bad_request, "expected /internal/kv/<64 lowercase hex digits of a block hash>",
                          "invalid_request_error", "invalid_hash", "hash");
  }
  const bool snapshot = query == "kind=snapshot";
  if (!query.empty() && !snapshot && query != "kind=block") {
    return io::make_error(version, io::http::status::bad_request, "kind: expected block or snapshot", "invalid_request_error",
                          "invalid_kind", "kind");
  }
  return io::async_reply{[scheduler = engine_.scheduler(), h = *h, snapshot, version] { return serve(scheduler, h, snapshot, version); }};
}

}  // namespace strata::api
