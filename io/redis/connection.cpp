#include "io/redis/connection.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

namespace strata::redis {

namespace asio = boost::asio;

struct connection::watcher {
  watcher(asio::any_io_executor ex, int fd) : sd(ex, fd) {}
  asio::posix::stream_descriptor sd;
  bool want[2] = {false, false};   // read, write: what hiredis asked for
  bool armed[2] = {false, false};  // a wait is out
};

struct connection::pending {
  explicit pending(asio::any_io_executor ex) : timer(ex) {}
  callback cb;
  asio::steady_timer timer;
  bool done = false;
};

namespace {

reply copy_reply(const redisReply& r) {
  reply out;
  switch (r.type) {
    case REDIS_REPLY_STRING: out.type = reply::kind::string; break;
    case REDIS_REPLY_STATUS: out.type = reply::kind::status; break;
    case REDIS_REPLY_ERROR: out.type = reply::kind::error; break;
    case REDIS_REPLY_INTEGER: out.type = reply::kind::integer; break;
    case REDIS_REPLY_ARRAY: out.type = reply::kind::array; break;
    default: out.type = reply::kind::nil; break;
  }
  out.integer = r.integer;
  if (r.str) out.str.assign(r.str, r.len);
  for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(copy_reply(*r.element[i]));
  return out;
}

connection* owner(void* privdata) { return static_cast<connection*>(privdata); }

}  // namespace

connection::connection(asio::any_io_executor ex, std::string name, std::chrono::milliseconds timeout)
    : ex_(std::move(ex)), name_(std::move(name)), timeout_(timeout) {}

std::shared_ptr<connection> connection::open(asio::any_io_executor ex, std::string host, int port,
                                             std::chrono::milliseconds timeout) {
  std::shared_ptr<connection> c(new connection(ex, host + ":" + std::to_string(port), timeout));
  redisAsyncContext* ac = redisAsyncConnect(host.c_str(), port);
  if (!ac) return c;
  if (ac->err) {
    redisAsyncFree(ac);
    return c;
  }
  c->ctx_ = ac;
  c->watch_ = std::make_unique<watcher>(ex, ac->c.fd);
  ac->data = c.get();
  ac->ev.data = c.get();
  ac->ev.addRead = [](void* p) {
    owner(p)->watch_->want[0] = true;
    owner(p)->arm(false);
  };
  ac->ev.delRead = [](void* p) { owner(p)->watch_->want[0] = false; };
  ac->ev.addWrite = [](void* p) {
    owner(p)->watch_->want[1] = true;
    owner(p)->arm(true);
  };
  ac->ev.delWrite = [](void* p) { owner(p)->watch_->want[1] = false; };
  ac->ev.cleanup = &connection::on_cleanup;
  return c;
}

connection::~connection() {
  if (ctx_) redisAsyncFree(ctx_);
}

void connection::on_cleanup(void* privdata) {
  // hiredis frees its context and closes the socket next: stop watching it, without closing it.
  connection* c = owner(privdata);
  c->ctx_ = nullptr;
  boost::system::error_code ec;
  c->watch_->sd.release();
  c->watch_->want[0] = c->watch_->want[1] = false;
}

void connection::arm(bool write) {
  const int i = write ? 1 : 0;
  if (!ctx_ || watch_->armed[i]) return;
  watch_->armed[i] = true;
  auto self = shared_from_this();
  watch_->sd.async_wait(write ? asio::posix::stream_descriptor::wait_write : asio::posix::stream_descriptor::wait_read,
                        [self, i](const boost::system::error_code& ec) {
                          self->watch_->armed[i] = false;
                          if (ec || !self->ctx_ || !self->watch_->want[i]) return;
                          if (i == 1) redisAsyncHandleWrite(self->ctx_);
                          else redisAsyncHandleRead(self->ctx_);
                          if (self->ctx_ && self->watch_->want[i]) self->arm(i == 1);
                        });
}

void connection::on_reply(redisAsyncContext* ac, void* r, void* privdata) {
  auto* holder = static_cast<std::shared_ptr<pending>*>(privdata);
  std::shared_ptr<pending> p = std::move(*holder);
  delete holder;
  if (p->done) return;
  p->done = true;
  p->timer.cancel();
  if (!r) {
    const std::string name = ac && ac->data ? static_cast<connection*>(ac->data)->name_ : "?";
    p->cb(error{errc::io_error, "redis " + name + ": connection lost"});
    return;
  }
  p->cb(copy_reply(*static_cast<redisReply*>(r)));
}

void connection::command(std::vector<std::string> argv, callback cb) {
  if (!ctx_) {
    cb(error{errc::io_error, "redis " + name_ + ": not connected"});
    return;
  }
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto p = std::make_shared<pending>(ex_);
  p->cb = std::move(cb);
  auto* holder = new std::shared_ptr<pending>(p);
  if (redisAsyncCommandArgv(ctx_, &connection::on_reply, holder, static_cast<int>(args.size()), args.data(), lens.data()) != REDIS_OK) {
    delete holder;
    p->done = true;
    p->cb(error{errc::io_error, "redis " + name_ + ": connection closing"});
    return;
  }
  p->timer.expires_after(timeout_);
  std::weak_ptr<connection> weak = weak_from_this();
  p->timer.async_wait([p, weak](const boost::system::error_code& ec) {
    if (ec || p->done) return;
    p->done = true;
    auto self = weak.lock();
    p->cb(error{errc::io_error, "redis " + (self ? self->name_ : std::string("?")) + ": timed out"});
    if (self) self->close();  // a server that stopped answering is treated as gone
  });
}

void connection::close() {
  if (ctx_) redisAsyncFree(ctx_);
}

}  // namespace strata::redis
