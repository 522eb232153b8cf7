#pragma once
// redis_cluster (tests): a real Redis cluster of three masters on loopback ports, in a temporary
// directory: redis-server --cluster-enabled yes three times, then redis-cli --cluster create. The
// servers are this process's children and are killed with it. Tests skip when redis-server is
// not installed (scripts/install-deps.sh installs it).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <hiredis/hiredis.h>

namespace strata::redis::testing {

/// A free loopback TCP port (bound and let go) whose cluster bus port, 10000 above, is valid and
/// free too.
inline int free_port() {
  boost::asio::io_context ctx;
  const auto lo = boost::asio::ip::make_address("127.0.0.1");
  while (true) {
    boost::asio::ip::tcp::acceptor a(ctx, {lo, 0});
    const int port = a.local_endpoint().port();
    if (port + 10000 > 65535) continue;
    boost::system::error_code ec;
    boost::asio::ip::tcp::acceptor bus(ctx);
    bus.open(boost::asio::ip::tcp::v4(), ec);
    if (!ec) bus.bind({lo, static_cast<unsigned short>(port + 10000)}, ec);
    if (!ec) return port;
  }
}

/// One synchronous command on host:port, its reply as text (a string, status or error reply) or
/// integer; "" when the server cannot be reached.
inline std::string sync_command(int port, const std::vector<std::string>& argv) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (!c || c->err) {
    if (c) redisFree(c);
    return "";
  }
  std::vector<const char*> a;
  std::vector<std::size_t> l;
  for (const auto& s : argv) a.push_back(s.c_str()), l.push_back(s.size());
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(a.size()), a.data(), l.data()));
  std::string out;
  if (r) {
    if (r->str) out.assign(r->str, r->len);
    else if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

class redis_cluster {
 public:
  static bool available() { return std::system("command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1") == 0; }

  explicit redis_cluster(int masters = 3) {
    dir_ = std::filesystem::temp_directory_path() / ("strata-redis-" + std::to_string(::getpid()) + "-" + std::to_string(free_port()));
    std::filesystem::create_directories(dir_);
    for (int i = 0; i < masters; ++i) {
      const int port = free_port();
      ports.push_back(port);
      pids_.push_back(spawn(port));
    }
    for (int port : ports) wait_for([&] { return sync_command(port, {"PING"}) == "PONG"; });
    std::string cmd = "redis-cli --cluster create";
    for (int port : ports) cmd += " 127.0.0.1:" + std::to_string(port);
    cmd += " --cluster-replicas 0 --cluster-yes >" + (dir_ / "create.log").string() + " 2>&1";
    created = std::system(cmd.c_str()) == 0;
    for (int port : ports) {
      wait_for([&] { return sync_command(port, {"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos; });
    }
  }
  ~redis_cluster() {
    for (std::size_t i = 0; i < pids_.size(); ++i) kill(i);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  /// Kills master i (SIGKILL) and reaps it.
  void kill(std::size_t i) {
    if (pids_[i] <= 0) return;
    ::kill(pids_[i], SIGKILL);
    ::waitpid(pids_[i], nullptr, 0);
    pids_[i] = -1;
  }
  /// The node id of master i.
  std::string id(std::size_t i) const { return sync_command(ports[i], {"CLUSTER", "MYID"}); }
  /// The seeds as --redis takes them: host:port,host:port,...
  std::string seeds() const {
    std::string s;
    for (int p : ports) s += (s.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(p);
    return s;
  }

  std::vector<int> ports;
  bool created = false;

 private:
  pid_t spawn(int port) {
    const std::string p = std::to_string(port);
    const std::string conf = "nodes-" + p + ".conf";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      std::filesystem::current_path(dir_);
      const std::string log = "redis-" + p + ".log";
      ::execlp("redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
               "--cluster-config-file", conf.c_str(), "--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no", "--save", "", "--appendonly", "no",
               "--logfile", log.c_str(), "--protected-mode", "no", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  }
  template <class F>
  static void wait_for(F ready) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!ready() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::filesystem::path dir_;
  std::vector<pid_t> pids_;
};

}  // namespace strata::redis::testing
