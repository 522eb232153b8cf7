#include "io/http_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "io/http_session.hpp"

namespace strata::io {

namespace net = boost::asio;
using tcp = net::ip::tcp;

http_server::http_server(net::io_context& ctx, http_options opts, request_handler handler)
    : ctx_(ctx), opts_(std::move(opts)), handler_(std::move(handler)), acceptor_(net::make_strand(ctx)) {}

http_server::~http_server() = default;

result<void> http_server::start() {
  boost::system::error_code ec;
  auto addr = net::ip::make_address(opts_.host, ec);
  if (ec) return fail(errc::invalid_argument, "server.host: '", opts_.host, "' is not an IP address");
  tcp::endpoint ep{addr, opts_.port};
  auto where = opts_.host + ":" + std::to_string(opts_.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail(errc::io_error, "cannot listen on ", where, ": ", ec.message());
  port_ = acceptor_.local_endpoint().port();
  accept_loop_start();
  return {};
}

void http_server::accept_loop_start() {
  auto self = shared_from_this();
  {
    std::lock_guard lock(mu_);
    listening_ = true;
  }
  net::co_spawn(
      acceptor_.get_executor(),
      [self]() -> net::awaitable<void> {
        for (;;) {
          auto [ec, socket] =
              co_await self->acceptor_.async_accept(net::make_strand(self->ctx_), net::as_tuple(net::use_awaitable));
          if (ec == net::error::operation_aborted || self->stopping()) co_return;
          if (ec) {
            // Out of descriptors and the like: report, keep serving the connections we have.
            spdlog::warn("accept failed: {}", ec.message());
            continue;
          }
          bool over = self->live_.load() >= static_cast<std::size_t>(self->opts_.max_connections);
          std::uint64_t id;
          std::shared_ptr<http_session> session;
          {
            std::lock_guard lock(self->mu_);
            id = self->next_id_++;
            session = std::make_shared<http_session>(self, id, boost::beast::tcp_stream(std::move(socket)), over);
            self->sessions_[id] = session;
          }
          self->live_.fetch_add(1);
          // The session's coroutine runs on the strand its socket was accepted with.
          net::co_spawn(session->executor(), [session]() { return session->run(); }, net::detached);
        }
      },
      [self](std::exception_ptr) {
        // On the acceptor's strand: the listener is closed for good before a waiter hears of it.
        boost::system::error_code ec;
        self->acceptor_.close(ec);
        {
          std::lock_guard lock(self->mu_);
          self->listening_ = false;
        }
        self->idle_.notify_all();
      });
}

void http_server::on_session_end(std::uint64_t id) {
  {
    std::lock_guard lock(mu_);
    live_.fetch_sub(1);
    sessions_.erase(id);
  }
  idle_.notify_all();
}

bool http_server::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_.wait_for(lock, timeout, [this] { return live_.load() == 0 && (!stopping() || !listening_); });
}

void http_server::stop() {
  if (stopping_.exchange(true)) return;
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ec;
    self->acceptor_.close(ec);
  });
  std::vector<std::shared_ptr<http_session>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->close_if_idle();
}

}  // namespace strata::io
