// Actor runtime benchmark: messages per second through one actor, and the ping-pong round trip
// between two actors on a two-thread pool. Prints one line per figure (and --json for tools).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <thread>
#include <variant>
#include <vector>

#include "actors/runtime/actor_system.hpp"

namespace {

using namespace strata::actors;
using clock_type = std::chrono::steady_clock;

struct tick {
  std::uint64_t value;
};

class sink_actor final : public actor<std::variant<tick>> {
 public:
  sink_actor(std::shared_ptr<std::atomic<std::uint64_t>> received, std::uint64_t expected,
             std::shared_ptr<std::promise<void>> done)
      : received_(std::move(received)), expected_(expected), done_(std::move(done)) {}
  void receive(std::variant<tick> msg) override {
    sum_ += std::get<tick>(msg).value;
    if (++count_ == expected_) {
      received_->store(sum_);
      done_->set_value();
    }
  }

 private:
  std::shared_ptr<std::atomic<std::uint64_t>> received_;
  std::uint64_t expected_;
  std::shared_ptr<std::promise<void>> done_;
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
};

double throughput(std::uint64_t n, int senders) {
  actor_system sys({.threads = 2});
  auto received = std::make_shared<std::atomic<std::uint64_t>>(0);
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  auto sink = sys.spawn<sink_actor>("sink", supervision::stop_system, received, n, done);
  auto start = clock_type::now();
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&, s] {
      for (std::uint64_t i = s; i < n; i += senders) sink.tell(tick{i});
    });
  }
  for (auto& t : threads) t.join();
  fut.wait();
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  if (received->load() != n * (n - 1) / 2) std::fprintf(stderr, "actor_bench: lost messages!\n");
  return static_cast<double>(n) / secs;
}

struct ping {
  clock_type::time_point sent;
};
struct pong {
  clock_type::time_point sent;
};
struct start_msg {
  int rounds;
  std::promise<std::vector<double>> done;
};
using pinger_inbox = std::variant<pong, start_msg, struct peer_msg>;
using ponger_inbox = std::variant<ping, struct reply_to_msg>;
struct peer_msg {
  address<ponger_inbox> peer;
};
struct reply_to_msg {
  address<pinger_inbox> back;
};

class ponger final : public actor<ponger_inbox> {
 public:
  void receive(ponger_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(reply_to_msg m) { back_ = m.back; }
  void handle(ping p) { back_.tell(pong{p.sent}); }

 private:
  address<pinger_inbox> back_;
};

class pinger final : public actor<pinger_inbox> {
 public:
  void receive(pinger_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(peer_msg m) { peer_ = m.peer; }
  void handle(start_msg m) {
    left_ = m.rounds;
    done_ = std::move(m.done);
    samples_.reserve(static_cast<std::size_t>(m.rounds));
    peer_.tell(ping{clock_type::now()});
  }
  void handle(pong p) {
    samples_.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - p.sent).count());
    if (--left_ == 0) {
      done_.set_value(std::move(samples_));
      return;
    }
    peer_.tell(ping{clock_type::now()});
  }

 private:
  address<ponger_inbox> peer_;
  int left_ = 0;
  std::promise<std::vector<double>> done_;
  std::vector<double> samples_;
};

std::vector<double> ping_pong(int rounds) {
  actor_system sys({.threads = 2});
  auto a = sys.spawn<pinger>("pinger", supervision::stop_system);
  auto b = sys.spawn<ponger>("ponger", supervision::stop_system);
  a.tell(peer_msg{b});
  b.tell(reply_to_msg{a});
  std::promise<std::vector<double>> done;
  auto fut = done.get_future();
  a.tell(start_msg{rounds, std::move(done)});
  auto samples = fut.get();
  std::sort(samples.begin(), samples.end());
  return samples;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  constexpr std::uint64_t n = 5'000'000;
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) rates.push_back(throughput(n, 1));
  std::sort(rates.begin(), rates.end());
  double one_sender = rates[rates.size() / 2];
  rates.clear();
  for (int rep = 0; rep < 5; ++rep) rates.push_back(throughput(n, 2));
  std::sort(rates.begin(), rates.end());
  double two_senders = rates[rates.size() / 2];

  auto samples = ping_pong(200'000);
  double p50 = samples[samples.size() / 2];
  double p99 = samples[samples.size() * 99 / 100];
  if (json) {
    std::printf("{\"messages_per_s_1_sender\": %.0f, \"messages_per_s_2_senders\": %.0f, "
                "\"ping_pong_round_trip_p50_us\": %.2f, \"ping_pong_round_trip_p99_us\": %.2f}\n",
                one_sender, two_senders, p50, p99);
  } else {
    std::printf("messages/s through one actor (1 sender thread, median of 5): %.2f M\n", one_sender / 1e6);
    std::printf("messages/s through one actor (2 sender threads, median of 5): %.2f M\n", two_senders / 1e6);
    std::printf("ping-pong round trip between two actors, 2 pool threads: p50 %.2f us, p99 %.2f us\n", p50, p99);
  }
  return 0;
}
