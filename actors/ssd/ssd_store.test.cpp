#include "actors/ssd/ssd_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "actors/runtime/actor_system.hpp"
#include "io/ssd/small_disk.test.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::ssd {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// Stands in for the scheduler: keeps what the store tells it.
struct inbox_log {
  std::mutex mu;
  std::vector<kv::block_hash> written, not_written, removed;
  std::vector<record_meta> deferred;
  std::vector<bool> degraded;  // the state each update carried
  std::map<std::uint64_t, std::vector<std::optional<std::vector<std::byte>>>> loaded;
};

class fake_scheduler final : public actors::actor<sched::scheduler_inbox> {
 public:
  explicit fake_scheduler(std::shared_ptr<inbox_log> log) : log_(std::move(log)) {}
  void receive(sched::scheduler_inbox msg) override {
    std::lock_guard lock(log_->mu);
    if (auto* u = std::get_if<sched::ssd_update>(&msg)) {
      log_->written.insert(log_->written.end(), u->written.begin(), u->written.end());
      log_->not_written.insert(log_->not_written.end(), u->not_written.begin(), u->not_written.end());
      log_->removed.insert(log_->removed.end(), u->removed.begin(), u->removed.end());
      log_->deferred.insert(log_->deferred.end(), u->deferred.begin(), u->deferred.end());
      log_->degraded.push_back(u->degraded);
    } else if (auto* l = std::get_if<sched::ssd_loaded>(&msg)) {
      log_->loaded[l->order] = std::move(l->payloads);
    }
  }

 private:
  std::shared_ptr<inbox_log> log_;
};

template <class Pred>
bool eventually(std::shared_ptr<inbox_log> log, Pred pred) {
  for (auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    {
      std::lock_guard lock(log->mu);
      if (pred(*log)) return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("strata-ssd-actor-" + std::to_string(std::random_device{}()));
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(ssd_store, persists_blocks_in_the_background_and_loads_them_back_by_message) {
  temp_dir tmp;
  store_options o;
  o.dir = tmp.path;
  o.model = {1, 2};
  auto opened = segment_store::open(o);
  ASSERT_TRUE(opened) << opened.err().message;
  std::unique_ptr<segment_store> store = std::move(*opened);

  const auto seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto log = std::make_shared<inbox_log>();
  std::vector<record_meta> metas;
  std::vector<std::vector<std::byte>> payloads;
  {
    actors::actor_system system({.threads = 2});
    auto sched = system.spawn<fake_scheduler>("scheduler", actors::supervision::stop_system, log);
    auto actor = system.spawn_owning<ssd_store>("ssd-store", std::move(store), sched, store_metrics{});
    actor.tell(ring_ready{});
    for (int i = 0; i < 40; ++i) {
      record_meta m;
      for (auto& w : m.hash.w) w = rng();
      m.parent = i ? metas.back().hash : kv::block_hash{};
      m.tokens = 32;
      m.layers = 3;
      std::vector<std::byte> p(1000 + rng() % 70000);
      for (auto& b : p) b = static_cast<std::byte>(rng());
      metas.push_back(m);
      payloads.push_back(p);
      actor.tell(persist{m, std::move(p)});
    }
    ASSERT_TRUE(eventually(log, [](inbox_log& l) { return l.written.size() == 40; })) << "writes never all completed";
    // One order for every block, with an unknown hash in the middle.
    load order{7, {}};
    for (const auto& m : metas) order.hashes.push_back(m.hash);
    kv::block_hash unknown;
    unknown.w = {rng(), rng(), rng(), rng()};
    order.hashes.insert(order.hashes.begin() + 20, unknown);
    actor.tell(std::move(order));
    ASSERT_TRUE(eventually(log, [](inbox_log& l) { return l.loaded.contains(7); })) << "the load was never answered";
    std::lock_guard lock(log->mu);
    const auto& got = log->loaded.at(7);
    ASSERT_EQ(got.size(), 41u);
    for (std::size_t i = 0, k = 0; i < got.size(); ++i) {
      if (i == 20) {
        EXPECT_FALSE(got[i]) << "an unknown hash came back with data";
        continue;
      }
      ASSERT_TRUE(got[i]) << "block " << k << " missing";
      EXPECT_EQ(*got[i], payloads[k]) << "block " << k;
      ++k;
    }
    EXPECT_TRUE(log->not_written.empty());
    system.stop();
  }
  // Another store on the same directory (a restart) finds them all: the actor closed its own.
  auto again = segment_store::open(o);
  ASSERT_TRUE(again);
  for (const auto& m : metas) EXPECT_TRUE((*again)->contains(m.hash));
}

TEST(ssd_store, stopping_flushes_the_writes_still_queued) {
  temp_dir tmp;
  store_options o;
  o.dir = tmp.path;
  o.model = {3, 4};
  auto opened = segment_store::open(o);
  ASSERT_TRUE(opened) << opened.err().message;
  std::unique_ptr<segment_store> store = std::move(*opened);
  std::mt19937_64 rng(test_seed());
  std::vector<kv::block_hash> hashes;
  {
    actors::actor_system system({.threads = 1});
    auto log = std::make_shared<inbox_log>();
    auto sched = system.spawn<fake_scheduler>("scheduler", actors::supervision::stop_system, log);
    auto actor = system.spawn_owning<ssd_store>("ssd-store", std::move(store), sched, store_metrics{});
    for (int i = 0; i < 64; ++i) {
      record_meta m;
      m.hash.w = {rng(), rng(), rng(), rng()};
      hashes.push_back(m.hash);
      actor.tell(persist{m, std::vector<std::byte>(256 << 10, std::byte{0x5a})});
    }
    system.stop();  // at once: the writes are queued or in flight
  }
  auto again = segment_store::open(o);
  ASSERT_TRUE(again);
  for (const auto& h : hashes) EXPECT_TRUE((*again)->contains(h)) << h.hex();
}

TEST(ssd_store, defers_blocks_while_the_disk_is_full_and_says_by_itself_when_it_writes_again) {
  temp_dir tmp;
  fs::create_directories(tmp.path);
  testing::small_disk disk(tmp.path);
  if (!disk.unavailable().empty()) GTEST_SKIP() << disk.unavailable();
  store_options o;
  o.dir = disk.path() / "kv";
  o.model = {5, 6};
  o.segment_bytes = 1 << 20;
  auto opened = segment_store::open(o);
  ASSERT_TRUE(opened) << opened.err().message;
  disk.fill();  // full before the first record

  const auto seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  metrics::registry registry;
  const store_metrics m = store_metrics::create(registry);
  auto log = std::make_shared<inbox_log>();
  std::unordered_map<kv::block_hash, std::vector<std::byte>, kv::block_hash_hasher> payloads;
  {
    actors::actor_system system({.threads = 2});
    auto sched = system.spawn<fake_scheduler>("scheduler", actors::supervision::stop_system, log);
    auto actor = system.spawn_owning<ssd_store>("ssd-store", std::move(*opened), sched, m);
    actor.tell(ring_ready{});
    EXPECT_EQ(tier_state_of(m.state->value()), tier_state::on);
    constexpr int n = 8;
    for (int i = 0; i < n; ++i) {
      record_meta meta;
      meta.hash.w = {rng(), rng(), rng(), rng()};
      meta.parent.w = {rng(), rng(), rng(), rng()};
      meta.tokens = 32;
      meta.layers = 2;
      std::vector<std::byte> p(64 << 10, static_cast<std::byte>(rng()));
      payloads[meta.hash] = p;
      actor.tell(persist{meta, std::move(p)});
    }
    // A few may still fit (the file system keeps some blocks back); the rest come back deferred.
    ASSERT_TRUE(eventually(log, [](inbox_log& l) { return l.written.size() + l.deferred.size() == n; }))
        << "the blocks were neither written nor deferred";
    {
      std::lock_guard lock(log->mu);
      ASSERT_FALSE(log->deferred.empty()) << "a full disk took every block";
      EXPECT_TRUE(log->degraded.back());
      EXPECT_TRUE(log->not_written.empty());
      for (const auto& d : log->deferred) EXPECT_TRUE(payloads.contains(d.hash)) << d.hash.hex();
    }
    EXPECT_EQ(tier_state_of(m.state->value()), tier_state::degraded);

    // Room again, and no message from anyone: the store looks for it by itself.
    disk.free();
    ASSERT_TRUE(eventually(log, [](inbox_log& l) { return !l.degraded.back(); })) << "never said it writes again";
    EXPECT_EQ(tier_state_of(m.state->value()), tier_state::on);

    // Offered again, the deferred blocks are written.
    std::vector<record_meta> again;
    {
      std::lock_guard lock(log->mu);
      again = log->deferred;
    }
    for (const auto& meta : again) actor.tell(persist{meta, payloads.at(meta.hash)});
    ASSERT_TRUE(eventually(log, [](inbox_log& l) { return l.written.size() == n; })) << "the deferred blocks were not written";
    system.stop();
  }
  auto reopened = segment_store::open(o);
  ASSERT_TRUE(reopened);
  for (const auto& [hash, p] : payloads) EXPECT_TRUE((*reopened)->contains(hash)) << hash.hex();
}

}  // namespace
}  // namespace strata::ssd
