#include "actors/runtime/actor_system.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

namespace strata::actors {
namespace {

using namespace std::chrono_literals;

// ---- message rules, checked at compile time ----
struct owned_payload {
  std::vector<float> values;
  std::string text;
};
struct borrowed_view {
  std::string_view text;
};
struct borrowed_pointer {
  const float* data;
};
struct nested_borrow {
  std::vector<borrowed_view> items;
};
struct shares_mutable {
  std::shared_ptr<std::vector<int>> data;
};
struct shares_const {
  std::shared_ptr<const std::vector<int>> data;
};
static_assert(message<owned_payload>);
static_assert(message<shares_const>);
static_assert(!message<borrowed_view>);
static_assert(!message<borrowed_pointer>);
static_assert(!message<nested_borrow>);
static_assert(!message<shares_mutable>);
static_assert(!message<std::span<const int>>);
static_assert(inbox<std::variant<owned_payload, shares_const>>);
static_assert(!inbox<owned_payload>);

// ---- a recorder actor ----
struct record {
  int sender;
  int seq;
};
struct flush {
  std::promise<std::vector<record>> done;
};
using recorder_inbox = std::variant<record, flush>;

class recorder final : public actor<recorder_inbox> {
 public:
  explicit recorder(std::shared_ptr<std::atomic<int>> inside) : inside_(std::move(inside)) {}
  void receive(recorder_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(record r) {
    // Two handlers of one actor at once would show here (and to ThreadSanitizer).
    if (inside_->fetch_add(1) != 0) overlap_ = true;
    seen_.push_back(r);
    std::this_thread::yield();
    inside_->fetch_sub(1);
  }
  void handle(flush f) {
    if (overlap_) seen_.clear();
    f.done.set_value(seen_);
  }

 private:
  std::shared_ptr<std::atomic<int>> inside_;
  std::vector<record> seen_;
  bool overlap_ = false;
};

TEST(actor_system, delivers_each_senders_messages_in_order_and_never_concurrently) {
  actor_system sys({.threads = 2});
  auto inside = std::make_shared<std::atomic<int>>(0);
  auto rec = sys.spawn<recorder>("recorder", supervision::stop_system, inside);
  constexpr int senders = 4;
  constexpr int per_sender = 5000;
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&, s] {
      for (int i = 0; i < per_sender; ++i) ASSERT_TRUE(rec.tell(record{s, i}));
    });
  }
  for (auto& t : threads) t.join();
  std::promise<std::vector<record>> p;
  auto fut = p.get_future();
  rec.tell(flush{std::move(p)});
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  auto seen = fut.get();
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(senders * per_sender));  // empty if overlapped
  std::vector<int> next(senders, 0);
  for (auto r : seen) {
    ASSERT_EQ(r.seq, next[r.sender]) << "sender " << r.sender;
    ++next[r.sender];
  }
}

// ---- ping-pong ----
struct ball_with_pointer {
  int remaining;
  std::promise<int>* done;
};
static_assert(!message<ball_with_pointer>);

struct hit {
  int remaining;
};
using player_inbox = std::variant<hit, struct set_peer_msg, struct finish_msg>;
struct set_peer_msg {
  address<player_inbox> peer;
};
struct finish_msg {
  std::promise<int> done;
};

class player final : public actor<player_inbox> {
 public:
  void receive(player_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(set_peer_msg m) { peer_ = m.peer; }
  void handle(finish_msg m) { done_ = std::move(m.done); armed_ = true; }
  void handle(hit h) {
    ++hits_;
    if (h.remaining == 0) {
      if (armed_) done_.set_value(hits_);
      return;
    }
    peer_.tell(hit{h.remaining - 1});
  }

 private:
  address<player_inbox> peer_;
  std::promise<int> done_;
  bool armed_ = false;
  int hits_ = 0;
};

TEST(actor_system, two_actors_play_ping_pong_until_the_count_runs_out) {
  actor_system sys({.threads = 2});
  auto a = sys.spawn<player>("a", supervision::stop_system);
  auto b = sys.spawn<player>("b", supervision::stop_system);
  a.tell(set_peer_msg{b});
  b.tell(set_peer_msg{a});
  std::promise<int> done_a, done_b;
  auto fa = done_a.get_future();
  auto fb = done_b.get_future();
  a.tell(finish_msg{std::move(done_a)});
  b.tell(finish_msg{std::move(done_b)});
  a.tell(hit{10001});  // a receives the odd counts, b the even ones; b sees 0
  ASSERT_EQ(fb.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fb.get(), 5001);
}

// ---- pass_on: a relay whose hops stay on one thread ----
struct baton {
  int remaining;
  std::thread::id last;
};
using relay_inbox = std::variant<baton, struct relay_next>;
struct relay_next {
  address<relay_inbox> next;
};

class relay final : public actor<relay_inbox> {
 public:
  /// `same_thread` counts the hops that ran on the previous hop's thread; `done` gets the count.
  relay(std::shared_ptr<std::atomic<int>> same_thread, std::shared_ptr<std::promise<int>> done, bool pass_on)
      : same_thread_(std::move(same_thread)), done_(std::move(done)), pass_on_(pass_on) {}
  void receive(relay_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(relay_next m) { next_ = m.next; }
  void handle(baton b) {
    const auto here = std::this_thread::get_id();
    if (b.last == here) same_thread_->fetch_add(1);
    if (b.remaining == 0) {
      done_->set_value(same_thread_->load());
      return;
    }
    if (pass_on_) next_.pass_on(baton{b.remaining - 1, here});
    else next_.tell(baton{b.remaining - 1, here});
    // Still busy after sending: a thread woken for the baton takes it meanwhile.
    std::this_thread::sleep_for(20us);
  }

 private:
  std::shared_ptr<std::atomic<int>> same_thread_;
  std::shared_ptr<std::promise<int>> done_;
  bool pass_on_;
  address<relay_inbox> next_;
};

/// Runs a baton `hops` times round a ring of relays on 4 threads; returns how many hops ran on
/// the thread of the hop before them.
int relay_on_same_thread(bool pass_on, int hops) {
  actor_system sys({.threads = 4});
  constexpr std::size_t n = 8;
  auto same = std::make_shared<std::atomic<int>>(0);
  auto done = std::make_shared<std::promise<int>>();
  auto fut = done->get_future();
  std::vector<address<relay_inbox>> ring;
  for (std::size_t i = 0; i < n; ++i)
    ring.push_back(sys.spawn<relay>("relay" + std::to_string(i), supervision::stop_system, same, done, pass_on));
  for (std::size_t i = 0; i < n; ++i) ring[i].tell(relay_next{ring[(i + 1) % n]});
  ring[0].tell(baton{hops, {}});
  if (fut.wait_for(10s) != std::future_status::ready) return -1;
  return fut.get();
}

TEST(actor_system, pass_on_runs_the_next_stage_on_the_senders_thread) {
  constexpr int hops = 1000;
  const int passed = relay_on_same_thread(true, hops), told = relay_on_same_thread(false, hops);
  std::printf("hops on the previous hop's thread: pass_on %d of %d, tell %d of %d\n", passed, hops, told, hops);
  // (With tell(), a woken thread takes the baton while the sender sleeps: here 6-27 of 1000 hops
  // stayed on their thread. Printed, not checked: on a loaded machine the woken thread may be late.)
  EXPECT_GE(passed, hops * 99 / 100);
}

// ---- a reply is not held behind a long continuation ----
// The server's shape: the scheduler tells the stream hub a request is done (the hub then tells the
// connection) and passes the next step on to the first layer, which may run for a second. The
// hub's message, and the one it sends, must go on other threads meanwhile.
struct slow_step {
  std::chrono::milliseconds work;
};
struct reply_hop {
  int remaining;
};
using chain_inbox = std::variant<slow_step, reply_hop, struct chain_peers>;
struct chain_peers {
  address<chain_inbox> reply, slow;
};
struct chain_times {
  std::atomic<std::int64_t> replied{0}, slow_done{0};
};

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class chain_actor final : public actor<chain_inbox> {
 public:
  explicit chain_actor(std::shared_ptr<chain_times> t) : t_(std::move(t)) {}
  void receive(chain_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(chain_peers p) { peers_ = std::move(p); }
  /// The scheduler's role: reply first, then the long step as this handler's last act.
  void handle(slow_step s) {
    if (!peers_.slow.empty()) {
      peers_.reply.tell(reply_hop{2});
      peers_.slow.pass_on(slow_step{s});
      return;
    }
    std::this_thread::sleep_for(s.work);  // the layer's role
    t_->slow_done = now_us();
  }
  /// The hub's and then the connection's role: each hop a message of its own.
  void handle(reply_hop h) {
    if (h.remaining > 0) {
      self().tell(reply_hop{h.remaining - 1});
      return;
    }
    t_->replied = now_us();
  }

 private:
  std::shared_ptr<chain_times> t_;
  chain_peers peers_;
};

TEST(actor_system, a_reply_does_not_wait_for_the_step_passed_on_after_it) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: every thread serves one queue";
  actor_system sys({.threads = -1});  // one per core, as strata serve by default
  auto times = std::make_shared<chain_times>();
  auto scheduler = sys.spawn<chain_actor>("scheduler", supervision::stop_system, times);
  auto hub = sys.spawn<chain_actor>("hub", supervision::stop_system, times);
  auto layer = sys.spawn<chain_actor>("layer", supervision::stop_system, times);
  scheduler.tell(chain_peers{hub, layer});
  const std::int64_t start = now_us();
  scheduler.tell(slow_step{500ms});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((times->replied == 0 || times->slow_done == 0) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_NE(times->replied.load(), 0);
  ASSERT_NE(times->slow_done.load(), 0);
  std::printf("reply after %.1f ms, the step passed on after it done after %.1f ms\n", (times->replied - start) / 1e3,
              (times->slow_done - start) / 1e3);
  EXPECT_LT(times->replied.load(), times->slow_done.load());
}

// ---- fan-out / fan-in ----
struct work {
  int value;
  address<std::variant<struct partial>> reply_to;
};
struct partial {
  long long value;
};
using worker_inbox = std::variant<work>;
using collector_inbox = std::variant<partial, struct expect_msg>;
struct expect_msg {
  int count;
  std::promise<long long> done;
};

class squarer final : public actor<worker_inbox> {
 public:
  void receive(worker_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(work w) { w.reply_to.tell(partial{static_cast<long long>(w.value) * w.value}); }
};

class summer final : public actor<std::variant<partial>> {
 public:
  explicit summer(std::shared_ptr<std::promise<long long>> done, int expected)
      : done_(std::move(done)), expected_(expected) {}
  void receive(std::variant<partial> msg) override { visit_handle(*this, std::move(msg)); }
  void handle(partial p) {
    sum_ += p.value;
    if (++got_ == expected_) done_->set_value(sum_);
  }

 private:
  std::shared_ptr<std::promise<long long>> done_;
  int expected_;
  int got_ = 0;
  long long sum_ = 0;
};

TEST(actor_system, fans_work_out_to_many_actors_and_collects_every_reply) {
  actor_system sys({.threads = 2});
  constexpr int workers = 8;
  constexpr int items = 4000;
  auto done = std::make_shared<std::promise<long long>>();
  auto fut = done->get_future();
  auto sum = sys.spawn<summer>("sum", supervision::stop_system, done, items);
  std::vector<address<worker_inbox>> pool;
  for (int i = 0; i < workers; ++i) pool.push_back(sys.spawn<squarer>("sq" + std::to_string(i), supervision::stop_system));
  long long expected = 0;
  for (int i = 0; i < items; ++i) {
    pool[i % workers].tell(work{i, sum});
    expected += static_cast<long long>(i) * i;
  }
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fut.get(), expected);
}

// ---- stop with messages queued ----
struct count_msg {};
class counter final : public actor<std::variant<count_msg>> {
 public:
  explicit counter(std::shared_ptr<std::atomic<int>> n, std::shared_ptr<std::atomic<bool>> stopped)
      : n_(std::move(n)), stopped_(std::move(stopped)) {}
  void receive(std::variant<count_msg>) override {
    std::this_thread::sleep_for(20us);
    n_->fetch_add(1);
  }
  void on_stop() override { stopped_->store(true); }

 private:
  std::shared_ptr<std::atomic<int>> n_;
  std::shared_ptr<std::atomic<bool>> stopped_;
};

TEST(actor_system, stop_delivers_queued_messages_then_refuses_new_ones) {
  auto n = std::make_shared<std::atomic<int>>(0);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  address<std::variant<count_msg>> c;
  {
    actor_system sys({.threads = 1});
    c = sys.spawn<counter>("counter", supervision::stop_system, n, stopped);
    for (int i = 0; i < 500; ++i) ASSERT_TRUE(c.tell(count_msg{}));
    sys.stop();
    EXPECT_EQ(n->load(), 500);
    EXPECT_TRUE(stopped->load());
    EXPECT_FALSE(c.tell(count_msg{}));
    EXPECT_EQ(sys.stopped_count(), 1u);
  }
  EXPECT_FALSE(c.tell(count_msg{}));  // the system is gone: the address is dead, not dangling
  EXPECT_TRUE(c.empty());
}

// ---- supervision ----
struct boom {};
struct get_state {
  std::promise<int> value;
};
struct bump {};
using fragile_inbox = std::variant<boom, bump, get_state>;
class fragile final : public actor<fragile_inbox> {
 public:
  void receive(fragile_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(boom) { throw std::runtime_error("kaboom"); }
  void handle(bump) { ++state_; }
  void handle(get_state g) { g.value.set_value(state_); }

 private:
  int state_ = 0;
};

TEST(actor_system, restart_policy_replaces_the_state_and_keeps_the_address) {
  actor_system sys({.threads = 0});
  std::vector<failure_report> reports;
  sys.on_failure([&](const failure_report& r) { reports.push_back(r); });
  auto f = sys.spawn<fragile>("fragile", supervision::restart);
  f.tell(bump{});
  f.tell(bump{});
  f.tell(boom{});
  f.tell(bump{});
  std::promise<int> p;
  auto fut = p.get_future();
  f.tell(get_state{std::move(p)});
  sys.run_all();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].actor, "fragile");
  EXPECT_EQ(reports[0].what, "kaboom");
  EXPECT_TRUE(reports[0].restarted);
  EXPECT_EQ(fut.get(), 1);  // fresh state after the restart, then one bump
  EXPECT_FALSE(sys.stop_requested());
}

TEST(actor_system, stop_system_policy_escalates_to_a_stop_request) {
  actor_system sys({.threads = 2});
  auto f = sys.spawn<fragile>("fragile", supervision::stop_system);
  f.tell(boom{});
  ASSERT_TRUE(sys.wait_for_stop_request(5000ms));
  sys.stop();
  EXPECT_FALSE(f.tell(bump{}));
}

TEST(actor_system, too_many_restarts_escalate_to_stop_the_system) {
  actor_system sys({.threads = 0, .max_restarts = 3});
  auto f = sys.spawn<fragile>("fragile", supervision::restart);
  for (int i = 0; i < 4; ++i) f.tell(boom{});
  sys.run_all();
  EXPECT_TRUE(sys.stop_requested());
}

TEST(actor_system, a_handler_that_throws_outside_every_actor_ends_neither_its_thread_nor_the_process) {
  actor_system sys({.threads = 1});
  // A completion handler of no actor (as a connection's I/O is) that throws, then more work: the
  // one worker thread must still be there to run it.
  boost::asio::post(sys.context(), [] { throw std::runtime_error("a handler failed"); });
  boost::asio::post(sys.context(), [] { throw 42; });
  std::promise<void> ran;
  boost::asio::post(sys.context(), [&ran] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(5s), std::future_status::ready);
  sys.stop();
}

// ---- an actor that owns what it is given ----
struct read_owned {
  std::promise<int> value;
};
using owner_inbox = std::variant<read_owned>;

class owner final : public actor<owner_inbox> {
 public:
  explicit owner(std::unique_ptr<int> owned) : owned_(std::move(owned)) {}
  void receive(owner_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(read_owned r) { r.value.set_value(*owned_); }

 private:
  std::unique_ptr<int> owned_;
};

TEST(actor_system, spawn_owning_moves_a_unique_resource_into_the_actor) {
  actor_system sys({.threads = 0});
  auto resource = std::make_unique<int>(42);
  int* raw = resource.get();
  auto a = sys.spawn_owning<owner>("owner", std::move(resource));
  EXPECT_EQ(resource, nullptr);  // the caller kept nothing
  std::promise<int> p;
  auto fut = p.get_future();
  a.tell(read_owned{std::move(p)});
  sys.run_all();
  EXPECT_EQ(fut.get(), 42);
  EXPECT_EQ(*raw, 42);
}

// ---- manual executor ----
TEST(actor_system, manual_mode_delivers_exactly_one_message_per_step) {
  actor_system sys({.threads = 0});
  auto n = std::make_shared<std::atomic<int>>(0);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto c = sys.spawn<counter>("counter", supervision::stop_system, n, stopped);
  for (int i = 0; i < 3; ++i) c.tell(count_msg{});
  EXPECT_EQ(n->load(), 0);
  ASSERT_TRUE(sys.run_one());
  EXPECT_EQ(n->load(), 1);
  ASSERT_TRUE(sys.run_one());
  EXPECT_EQ(n->load(), 2);
  ASSERT_TRUE(sys.run_one());
  EXPECT_EQ(n->load(), 3);
  EXPECT_FALSE(sys.run_one());
}

TEST(actor_system, manual_mode_run_all_delivers_everything_queued_and_counts_it) {
  actor_system sys({.threads = 0});
  auto n = std::make_shared<std::atomic<int>>(0);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto c = sys.spawn<counter>("counter", supervision::stop_system, n, stopped);
  for (int i = 0; i < 5; ++i) c.tell(count_msg{});
  EXPECT_EQ(sys.run_all(), 5u);
  EXPECT_EQ(n->load(), 5);
  EXPECT_EQ(sys.run_all(), 0u);
}

TEST(actor_system, manual_mode_run_until_stops_as_soon_as_the_condition_holds) {
  actor_system sys({.threads = 0});
  auto n = std::make_shared<std::atomic<int>>(0);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto c = sys.spawn<counter>("counter", supervision::stop_system, n, stopped);
  for (int i = 0; i < 4; ++i) c.tell(count_msg{});
  EXPECT_EQ(sys.run_until([&] { return n->load() == 3; }), 3u);
  EXPECT_EQ(n->load(), 3);
  // Nothing is ready any more before the condition holds: it returns with what it ran.
  EXPECT_EQ(sys.run_until([] { return false; }), 1u);
  EXPECT_EQ(n->load(), 4);
}

TEST(actor_system, manual_mode_run_one_for_waits_for_an_event_from_outside_the_system) {
  actor_system sys({.threads = 0});
  auto n = std::make_shared<std::atomic<int>>(0);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto c = sys.spawn<counter>("counter", supervision::stop_system, n, stopped);
  EXPECT_FALSE(sys.run_one_for(1ms));  // nothing pending: it gives up after the timeout
  // A timer stands in for an I/O completion: not ready at once, ready without anyone stepping.
  boost::asio::steady_timer timer(sys.context(), 20ms);
  timer.async_wait([c](const boost::system::error_code& ec) {
    if (!ec) c.tell(count_msg{});
  });
  EXPECT_FALSE(sys.run_one());
  ASSERT_TRUE(sys.run_one_for(10s));  // the timer's handler
  EXPECT_EQ(n->load(), 0);
  ASSERT_TRUE(sys.run_one());  // the message it sent
  EXPECT_EQ(n->load(), 1);
}

TEST(actor_system, manual_mode_run_until_with_a_timeout_waits_for_outside_events_until_the_condition_holds) {
  actor_system sys({.threads = 0});
  auto n = std::make_shared<std::atomic<int>>(0);
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto c = sys.spawn<counter>("counter", supervision::stop_system, n, stopped);
  boost::asio::steady_timer timer(sys.context(), 20ms);
  timer.async_wait([c](const boost::system::error_code& ec) {
    if (!ec) c.tell(count_msg{});
  });
  c.tell(count_msg{});
  // The message ready now, then the timer's event, then the message it sends.
  EXPECT_TRUE(sys.run_until([&] { return n->load() == 2; }, 10s));
  EXPECT_EQ(n->load(), 2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(sys.run_until([] { return false; }, 30ms));  // nothing more comes: it gives up
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
}

TEST(actor_system, manual_mode_run_until_with_a_timeout_gives_up_on_actors_that_never_go_idle) {
  actor_system sys({.threads = 0});
  auto a = sys.spawn<player>("a", supervision::stop_system);
  auto b = sys.spawn<player>("b", supervision::stop_system);
  a.tell(set_peer_msg{b});
  b.tell(set_peer_msg{a});
  a.tell(hit{std::numeric_limits<int>::max()});  // a rally that outlasts any test
  EXPECT_FALSE(sys.run_until([] { return false; }, 30ms));
}

}  // namespace
}  // namespace strata::actors
