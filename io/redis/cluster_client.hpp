#pragma once
// cluster_client: commands to a Redis cluster (or one plain Redis server), each sent to the master
// that owns its key's slot. The slot map comes from CLUSTER SLOTS, asked of the seeds (and of
// every node met since) at the first command and again whenever the cluster says it changed:
//
//   MOVED slot host:port  the slot lives there now: the map is updated, the command sent again
//                         there, and the whole map refreshed in the background;
//   ASK slot host:port    the slot is being migrated and this key is already there: ASKING, then
//                         the command, on that node, for this one command only;
//   no answer, lost link  the map is refreshed and the command tried once more; then it fails,
//                         and the node is left alone for a while (options.down_for).
//
// A server without cluster support (CLUSTER SLOTS answers an error) serves every slot itself.
// Like connection, all calls and callbacks run on one strand.

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "io/redis/connection.hpp"

namespace strata::redis {

struct node_address {
  std::string host;
  int port = 6379;
  std::string name() const { return host + ":" + std::to_string(port); }
};

/// "host:port" (port 1..65535); empty when it is not one.
std::optional<node_address> parse_node(std::string_view s);
/// "host:port,host:port,..." (at least one); empty when any part is not a host:port.
std::optional<std::vector<node_address>> parse_nodes(std::string_view csv);
/// The cluster slot of a key: CRC16 (XMODEM) of the key, or of its {hash tag}, mod 16384.
std::uint16_t key_slot(std::string_view key);

struct cluster_options {
  std::vector<node_address> seeds;
  /// Deadline of each command (and of each connection attempt through it).
  std::chrono::milliseconds timeout{1000};
  /// MOVED/ASK redirections followed for one command before it fails.
  int max_redirects = 5;
  /// A node that failed (no connection, no answer) is not tried again for this long: commands for
  /// its slots fail at once meanwhile, instead of each opening a connection of its own.
  std::chrono::milliseconds down_for{1000};
};

class cluster_client : public std::enable_shared_from_this<cluster_client> {
 public:
  static std::shared_ptr<cluster_client> create(boost::asio::any_io_executor ex, cluster_options opts);

  /// Sends argv to the master of argv[key_index]'s slot; cb gets the reply (an error reply other
  /// than a redirection included) or the error that stopped it.
  void command(std::vector<std::string> argv, callback cb, std::size_t key_index = 1);
  /// Asks the nodes for the slot map again; `done` runs once it is in (or no node answered).
  void refresh(std::function<void()> done = {});
  /// The node the map names for a key's slot ("" before the first refresh).
  std::string node_of(std::string_view key) const;
  /// Redirections followed so far (MOVED, ASK), for tests and metrics.
  std::uint64_t moved() const { return moved_; }
  std::uint64_t asked() const { return asked_; }
  /// Closes every connection; pending commands fail.
  void close();

 private:
  struct op;
  cluster_client(boost::asio::any_io_executor ex, cluster_options opts);
  std::shared_ptr<connection> conn(const std::string& node);
  void send(std::shared_ptr<op> o, const std::string& node, bool asking);
  void on_result(std::shared_ptr<op> o, const std::string& node, result<reply> r);
  /// Tries CLUSTER SLOTS on candidates[i], then the next.
  void refresh_from(std::vector<std::string> candidates, std::size_t i);
  void finish_refresh();
  bool apply_slots(const reply& r, const std::string& asked);

  boost::asio::any_io_executor ex_;
  cluster_options opts_;
  std::vector<std::string> slots_;  // node name per slot; empty before the first refresh
  std::map<std::string, std::shared_ptr<connection>> conns_;
  std::map<std::string, std::chrono::steady_clock::time_point> down_until_;
  bool refreshing_ = false;
  bool closed_ = false;
  std::vector<std::function<void()>> after_refresh_;
  std::uint64_t moved_ = 0, asked_ = 0;
};

}  // namespace strata::redis
