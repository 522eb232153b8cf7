#pragma once
// replica_pool: the replicas behind `strata route`, as the router sees them: alive or not (the
// last health check or request to it failed), and how many of its requests are in flight there.
// Owns their state and counters; touched only on the router's one thread (no locks). A health
// loop asks each replica's /health every `interval`: a replica that failed comes back as soon as
// it answers 200 again, and one that stops answering goes out.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "io/upstream.hpp"
#include "src/common/metrics.hpp"
#include "src/route/replica_choice.hpp"

namespace strata::proxy {

struct replica {
  std::string url;  // as the replica advertises itself in the directory, no trailing '/'
  io::upstream_address address;
  bool alive = true;
  std::int32_t in_flight = 0;
  metrics::counter* routed = nullptr;
  metrics::counter* failures = nullptr;
  metrics::gauge* up = nullptr;
  metrics::gauge* load = nullptr;
};

class replica_pool {
 public:
  /// `urls` were checked by parse_http_url.
  replica_pool(const std::vector<std::string>& urls, metrics::registry& m, route::choice_options opts);

  std::size_t size() const { return replicas_.size(); }
  replica& at(int i) { return replicas_[static_cast<std::size_t>(i)]; }
  const replica& at(int i) const { return replicas_[static_cast<std::size_t>(i)]; }
  /// The replica for a request whose chain has `holders` (replica_choice's rule), leaving out
  /// those in `tried`; -1 when none is alive.
  route::choice choose(const std::vector<std::vector<std::string>>& holders, const std::vector<int>& tried);
  /// A live replica by load alone (round robin among equals), leaving out `tried`; -1 for none.
  int any(const std::vector<int>& tried) { return choose({}, tried).replica; }
  /// A request starts or ends at replica i.
  void started(int i);
  void ended(int i);
  /// Replica i refused a connection or died mid-request: out of the choice until it answers a
  /// health check again.
  void failed(int i);
  /// Checks each replica's /health every `interval`, each on its own (a partitioned replica
  /// holds up no other's check), until the context stops; an answer must come within `timeout`.
  void start_health_checks(boost::asio::any_io_executor ex, std::chrono::milliseconds interval, std::chrono::milliseconds timeout);

 private:
  boost::asio::awaitable<void> health_loop(int i, std::chrono::milliseconds interval, std::chrono::milliseconds timeout);
  void set_alive(int i, bool alive);

  std::vector<replica> replicas_;
  route::choice_options opts_;
  int last_ = -1;
};

}  // namespace strata::proxy
