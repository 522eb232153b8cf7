#include "io/redis/cluster_client.hpp"

#include <algorithm>
#include <charconv>

#include <spdlog/spdlog.h>

namespace strata::redis {

namespace {

constexpr std::size_t n_slots = 16384;

std::uint16_t crc16(std::string_view s) {
  std::uint16_t crc = 0;
  for (unsigned char c : s) {
    crc ^= static_cast<std::uint16_t>(c << 8);
    for (int i = 0; i < 8; ++i) crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

/// "MOVED 3999 127.0.0.1:6381" -> {"MOVED", slot, node}.
struct redirect {
  bool ask = false;
  std::size_t slot = 0;
  std::string node;
};

std::optional<redirect> parse_redirect(const reply& r) {
  if (!r.is_error()) return std::nullopt;
  std::string_view s = r.str;
  redirect out;
  if (s.starts_with("MOVED ")) s.remove_prefix(6);
  else if (s.starts_with("ASK ")) s.remove_prefix(4), out.ask = true;
  else return std::nullopt;
  const auto sp = s.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  if (std::from_chars(s.data(), s.data() + sp, out.slot).ec != std::errc{} || out.slot >= n_slots) return std::nullopt;
  out.node = std::string(s.substr(sp + 1));
  return out;
}

}  // namespace

std::optional<node_address> parse_node(std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  int port = 0;
  const auto p = s.substr(colon + 1);
  if (std::from_chars(p.data(), p.data() + p.size(), port).ec != std::errc{} || port < 1 || port > 65535) return std::nullopt;
  return node_address{std::string(s.substr(0, colon)), port};
}

std::optional<std::vector<node_address>> parse_nodes(std::string_view csv) {
  std::vector<node_address> out;
  while (true) {
    const auto comma = csv.find(',');
    auto n = parse_node(csv.substr(0, comma));
    if (!n) return std::nullopt;
    out.push_back(std::move(*n));
    if (comma == std::string_view::npos) return out;
    csv.remove_prefix(comma + 1);
  }
}

std::uint16_t key_slot(std::string_view key) {
  // Only the part between the first { and the next } is hashed, when it is not empty.
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16(key) % n_slots);
}

struct cluster_client::op {
  std::vector<std::string> argv;
  callback cb;
  std::uint16_t slot = 0;
  int redirects = 0;
  int retries = 0;
};

cluster_client::cluster_client(boost::asio::any_io_executor ex, cluster_options opts) : ex_(std::move(ex)), opts_(std::move(opts)) {}

std::shared_ptr<cluster_client> cluster_client::create(boost::asio::any_io_executor ex, cluster_options opts) {
  return std::shared_ptr<cluster_client>(new cluster_client(std::move(ex), std::move(opts)));
}

std::shared_ptr<connection> cluster_client::conn(const std::string& node) {
  auto& c = conns_[node];
  if (!c || !c->usable()) {
    auto a = parse_node(node);
    c = connection::open(ex_, a ? a->host : node, a ? a->port : 0, opts_.timeout);
  }
  return c;
}

void cluster_client::command(std::vector<std::string> argv, callback cb, std::size_t key_index) {
  auto o = std::make_shared<op>();
  o->slot = key_index < argv.size() ? key_slot(argv[key_index]) : 0;
  o->argv = std::move(argv);
  o->cb = std::move(cb);
  if (slots_.empty()) {
    refresh([self = shared_from_this(), o] {
      if (self->slots_.empty()) o->cb(error{errc::io_error, "redis: no node of the cluster answers"});
      else self->send(o, self->slots_[o->slot], false);
    });
    return;
  }
  send(o, slots_[o->slot], false);
}

void cluster_client::send(std::shared_ptr<op> o, const std::string& node, bool asking) {
  if (closed_) {
    o->cb(error{errc::bad_state, "redis: the client is closed"});
    return;
  }
  if (node.empty()) {
    o->cb(error{errc::io_error, "redis: no node serves slot " + std::to_string(o->slot)});
    return;
  }
  if (auto d = down_until_.find(node); d != down_until_.end()) {
    if (std::chrono::steady_clock::now() < d->second) {
      o->cb(error{errc::io_error, "redis " + node + ": down (failed less than " + std::to_string(opts_.down_for.count()) + " ms ago)"});
      return;
    }
    down_until_.erase(d);
  }
  auto c = conn(node);
  if (asking) c->command({"ASKING"}, [](result<reply>) {});
  c->command(o->argv, [self = shared_from_this(), o, node](result<reply> r) { self->on_result(o, node, std::move(r)); });
}

void cluster_client::on_result(std::shared_ptr<op> o, const std::string& node, result<reply> r) {
  if (!r || closed_) {
    // The node is gone or silent: a fresh map may name another master for the slot.
    if (!r && !closed_) down_until_[node] = std::chrono::steady_clock::now() + opts_.down_for;
    if (closed_ || o->retries++ >= 1) {
      o->cb(std::move(r));
      return;
    }
    refresh([self = shared_from_this(), o] {
      if (self->slots_.empty()) o->cb(error{errc::io_error, "redis: no node of the cluster answers"});
      else self->send(o, self->slots_[o->slot], false);
    });
    return;
  }
  auto rd = parse_redirect(*r);
  if (!rd) {
    o->cb(std::move(r));
    return;
  }
  if (++o->redirects > opts_.max_redirects) {
    o->cb(error{errc::io_error, "redis: too many redirections for slot " + std::to_string(o->slot) + " (last from " + node + ")"});
    return;
  }
  if (rd->ask) {
    ++asked_;
  } else {
    ++moved_;
    if (!slots_.empty()) slots_[rd->slot] = rd->node;
    refresh();
  }
  send(o, rd->node, rd->ask);
}

void cluster_client::refresh(std::function<void()> done) {
  if (done) after_refresh_.push_back(std::move(done));
  if (refreshing_) return;
  if (closed_) {
    finish_refresh();
    return;
  }
  refreshing_ = true;
  std::vector<std::string> candidates;
  for (const auto& s : opts_.seeds) candidates.push_back(s.name());
  for (const auto& [name, c] : conns_)
    if (std::find(candidates.begin(), candidates.end(), name) == candidates.end()) candidates.push_back(name);
  refresh_from(std::move(candidates), 0);
}

void cluster_client::refresh_from(std::vector<std::string> candidates, std::size_t i) {
  if (i >= candidates.size()) {
    spdlog::warn("redis: no node answered CLUSTER SLOTS");
    finish_refresh();
    return;
  }
  const std::string node = candidates[i];
  conn(node)->command({"CLUSTER", "SLOTS"}, [self = shared_from_this(), candidates = std::move(candidates), i, node](result<reply> r) mutable {
    if (r && self->apply_slots(*r, node)) {
      self->finish_refresh();
      return;
    }
    self->refresh_from(std::move(candidates), i + 1);
  });
}

bool cluster_client::apply_slots(const reply& r, const std::string& asked) {
  if (r.is_error()) {
    // A server without cluster support serves every slot.
    if (r.str.find("cluster support disabled") == std::string::npos) return false;
    slots_.assign(n_slots, asked);
    return true;
  }
  if (r.type != reply::kind::array || r.elements.empty()) return false;
  std::vector<std::string> map(n_slots);
  const std::string asked_host = parse_node(asked) ? parse_node(asked)->host : std::string();
  for (const auto& range : r.elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
    const auto& master = range.elements[2];
    std::string host = master.elements[0].str;
    if (host.empty() || host == "?") host = asked_host;
    const std::string name = host + ":" + std::to_string(master.elements[1].integer);
    const auto lo = static_cast<std::size_t>(range.elements[0].integer), hi = static_cast<std::size_t>(range.elements[1].integer);
    for (std::size_t s = lo; s <= hi && s < n_slots; ++s) map[s] = name;
  }
  slots_ = std::move(map);
  return true;
}

void cluster_client::finish_refresh() {
  refreshing_ = false;
  auto waiting = std::exchange(after_refresh_, {});
  for (auto& f : waiting) f();
}

std::string cluster_client::node_of(std::string_view key) const { return slots_.empty() ? std::string() : slots_[key_slot(key)]; }

void cluster_client::close() {
  closed_ = true;
  auto conns = std::exchange(conns_, {});
  for (auto& [name, c] : conns) c->close();
}

}  // namespace strata::redis
