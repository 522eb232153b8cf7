#include "io/kv_events/zmq_publisher.hpp"

#include <atomic>
#include <deque>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

namespace strata::kv_events {
namespace {

std::string be64(std::int64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((static_cast<std::uint64_t>(v) >> (56 - 8 * i)) & 0xff);
  return s;
}

std::uint64_t from_be64(const zmq::message_t& m) {
  std::uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (std::size_t i = 0; i < 8 && i < m.size(); ++i) v = (v << 8) | p[i];
  return v;
}

std::atomic<std::uint64_t> next_pair{1};

}  // namespace

struct zmq_publisher::impl {
  publisher_options opts;
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  zmq::socket_t replay{ctx, zmq::socket_type::router};
  zmq::socket_t inbound{ctx, zmq::socket_type::pair};  // the thread's end
  zmq::socket_t outbound{ctx, zmq::socket_type::pair};  // publish()'s end
  std::deque<std::pair<std::uint64_t, std::string>> buffer;
  std::uint64_t seq = 0;

  void send_batch(std::string payload) {
    const std::string seq_bytes = be64(static_cast<std::int64_t>(seq));
    pub.send(zmq::buffer(opts.topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub.send(zmq::buffer(payload), zmq::send_flags::dontwait);
    if (opts.buffer > 0) {
      if (buffer.size() == opts.buffer) buffer.pop_front();
      buffer.emplace_back(seq, std::move(payload));
    }
    ++seq;
  }

  void answer_replay() {
    std::vector<zmq::message_t> frames;
    while (true) {
      zmq::message_t m;
      if (!replay.recv(m, zmq::recv_flags::dontwait)) break;
      const bool more = m.more();
      frames.push_back(std::move(m));
      if (!more) break;
    }
    // A REQ client's frames: identity, empty delimiter, start; a DEALER's may lack the delimiter.
    if (frames.size() < 2 || frames.back().size() != 8) {
      spdlog::warn("kv events: malformed replay request ({} frames)", frames.size());
      return;
    }
    const std::string client = frames.front().to_string();
    const std::uint64_t start = from_be64(frames.back());
    auto reply = [&](const std::string& seq_bytes, std::string_view payload) {
      replay.send(zmq::buffer(client), zmq::send_flags::sndmore);
      replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
      replay.send(zmq::buffer(payload), zmq::send_flags::none);
    };
    for (const auto& [s, payload] : buffer)
      if (s >= start) reply(be64(static_cast<std::int64_t>(s)), payload);
    reply(be64(-1), "");
  }
};

result<std::unique_ptr<zmq_publisher>> zmq_publisher::start(publisher_options opts) {
  auto p = std::make_unique<impl>();
  p->opts = std::move(opts);
  std::string bound, bound_replay;
  try {
    p->pub.set(zmq::sockopt::linger, 0);
    p->pub.bind(p->opts.endpoint);
    bound = p->pub.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return error{errc::invalid_argument, "kv events endpoint " + p->opts.endpoint + ": " + e.what()};
  }
  try {
    if (!p->opts.replay_endpoint.empty()) {
      p->replay.set(zmq::sockopt::linger, 0);
      p->replay.bind(p->opts.replay_endpoint);
      bound_replay = p->replay.get(zmq::sockopt::last_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return error{errc::invalid_argument, "kv events replay endpoint " + p->opts.replay_endpoint + ": " + e.what()};
  }
  const std::string pair = "inproc://strata-kv-events-" + std::to_string(next_pair++);
  p->inbound.bind(pair);
  p->outbound.connect(pair);
  std::unique_ptr<zmq_publisher> out(new zmq_publisher(std::move(p)));
  out->bound_ = std::move(bound);
  out->bound_replay_ = std::move(bound_replay);
  out->thread_ = std::thread([self = out.get()] { self->run(); });
  return out;
}

zmq_publisher::zmq_publisher(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

zmq_publisher::~zmq_publisher() {
  if (thread_.joinable()) {
    {
      // A message of one zero byte asks the thread to stop; batches are never that short.
      std::lock_guard lock(send_mutex_);
      impl_->outbound.send(zmq::buffer(std::string_view("\0", 1)), zmq::send_flags::none);
    }
    thread_.join();
  }
}

void zmq_publisher::publish(std::string payload) {
  std::lock_guard lock(send_mutex_);
  impl_->outbound.send(zmq::buffer(payload), zmq::send_flags::none);
}

void zmq_publisher::run() {
  impl& p = *impl_;
  std::vector<zmq::pollitem_t> items{{p.inbound.handle(), 0, ZMQ_POLLIN, 0}};
  if (!p.opts.replay_endpoint.empty()) items.push_back({p.replay.handle(), 0, ZMQ_POLLIN, 0});
  try {
    while (true) {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
      if (items[0].revents & ZMQ_POLLIN) {
        zmq::message_t m;
        while (p.inbound.recv(m, zmq::recv_flags::dontwait)) {
          if (m.size() == 1 && *static_cast<const char*>(m.data()) == '\0') return;
          p.send_batch(m.to_string());
        }
      }
      if (items.size() > 1 && (items[1].revents & ZMQ_POLLIN)) p.answer_replay();
    }
  } catch (const zmq::error_t& e) {
    spdlog::error("kv events: publisher stopped: {}", e.what());
  }
}

}  // namespace strata::kv_events
