#include "actors/ssd/ssd_store.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <unordered_map>

#include "actors/runtime/actor_system.hpp"
#include "io/ssd/small_disk.test.hpp"
#include "tests/support/probe_actor.hpp"
#include "tests/support/test_seed.hpp"
#include "tests/support/temp_dir.hpp"

namespace strata::ssd {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// What the store told the scheduler so far, gathered from the probe in the scheduler's place.
/// `loaded` points into the probe's log: valid until the system steps again.
struct told {
  std::vector<kv::block_hash> written, not_written, removed;
  std::vector<record_meta> deferred;
  std::vector<bool> degraded;  // the state each update carried
  std::map<std::uint64_t, const std::vector<std::optional<std::vector<std::byte>>>*> loaded;
};

/// The store on a manual actor system, a probe standing in for the scheduler: the test delivers
/// every message on its own thread, so nothing needs a lock, and reads what the store said between
/// steps. The ring's completions still come from the kernel: step_until waits for them.
struct store_on_manual_system {
  actors::actor_system system{{.threads = 0}};
  test_support::probe_log<sched::scheduler_inbox> log = test_support::make_probe_log<sched::scheduler_inbox>();
  store_address actor;

  explicit store_on_manual_system(std::unique_ptr<segment_store> store, store_metrics metrics = {}) {
    auto sched = system.spawn<test_support::probe_actor<sched::scheduler_inbox>>("scheduler",
                                                                                 actors::supervision::stop_system, log);
    actor = system.spawn_owning<ssd_store>("ssd-store", std::move(store), sched, metrics);
  }

  told so_far() const {
    told t;
    for (const auto* u : test_support::received<sched::ssd_update>(log)) {
      t.written.insert(t.written.end(), u->written.begin(), u->written.end());
      t.not_written.insert(t.not_written.end(), u->not_written.begin(), u->not_written.end());
      t.removed.insert(t.removed.end(), u->removed.begin(), u->removed.end());
      t.deferred.insert(t.deferred.end(), u->deferred.begin(), u->deferred.end());
      t.degraded.push_back(u->degraded);
    }
    for (const auto* l : test_support::received<sched::ssd_loaded>(log)) t.loaded[l->order] = &l->payloads;
    return t;
  }

  /// Delivers messages (waiting for the ring or a timer when none is ready) until `done` holds of
  /// what the store has said; false if it does not within 20 s.
  bool step_until(const std::function<bool(const told&)>& done) {
    return system.run_until([&] { return done(so_far()); }, 20s);
  }
};

using test_support::temp_dir;

TEST(ssd_store, persists_blocks_in_the_background_and_loads_them_back_by_message) {
  temp_dir tmp;
  store_options o;
  o.dir = tmp.path;
  o.model = {1, 2};
  auto opened = segment_store::open(o);
  ASSERT_TRUE(opened) << opened.err().message;

  const auto seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<record_meta> metas;
  std::vector<std::vector<std::byte>> payloads;
  {
    store_on_manual_system t(std::move(*opened));
    t.actor.tell(ring_ready{});
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
      t.actor.tell(persist{m, std::move(p)});
    }
    ASSERT_TRUE(t.step_until([](const told& l) { return l.written.size() == 40; })) << "writes never all completed";
    // One order for every block, with an unknown hash in the middle.
    load order{7, {}};
    for (const auto& m : metas) order.hashes.push_back(m.hash);
    kv::block_hash unknown;
    unknown.w = {rng(), rng(), rng(), rng()};
    order.hashes.insert(order.hashes.begin() + 20, unknown);
    t.actor.tell(std::move(order));
    ASSERT_TRUE(t.step_until([](const told& l) { return l.loaded.contains(7); })) << "the load was never answered";
    const told l = t.so_far();
    const auto& got = *l.loaded.at(7);
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
    EXPECT_TRUE(l.not_written.empty());
    t.system.stop();
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
  std::mt19937_64 rng(test_seed());
  std::vector<kv::block_hash> hashes;
  {
    store_on_manual_system t(std::move(*opened));
    for (int i = 0; i < 64; ++i) {
      record_meta m;
      m.hash.w = {rng(), rng(), rng(), rng()};
      hashes.push_back(m.hash);
      t.actor.tell(persist{m, std::vector<std::byte>(256 << 10, std::byte{0x5a})});
    }
    // A few writes reach the ring; the stop comes while they are in flight and the rest still
    // wait in the mailbox.
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(t.system.run_one());
    t.system.stop();
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
  std::unordered_map<kv::block_hash, std::vector<std::byte>, kv::block_hash_hasher> payloads;
  {
    store_on_manual_system t(std::move(*opened), m);
    t.actor.tell(ring_ready{});
    EXPECT_EQ(tier_state_of(m.state->value()), tier_state::on);
    constexpr std::size_t n = 8;
    for (std::size_t i = 0; i < n; ++i) {
      record_meta meta;
      meta.hash.w = {rng(), rng(), rng(), rng()};
      meta.parent.w = {rng(), rng(), rng(), rng()};
      meta.tokens = 32;
      meta.layers = 2;
      std::vector<std::byte> p(64 << 10, static_cast<std::byte>(rng()));
      payloads[meta.hash] = p;
      t.actor.tell(persist{meta, std::move(p)});
    }
    // A few may still fit (the file system keeps some blocks back); the rest come back deferred.
    ASSERT_TRUE(t.step_until([](const told& l) { return l.written.size() + l.deferred.size() == n; }))
        << "the blocks were neither written nor deferred";
    const told full = t.so_far();
    ASSERT_FALSE(full.deferred.empty()) << "a full disk took every block";
    EXPECT_TRUE(full.degraded.back());
    EXPECT_TRUE(full.not_written.empty());
    for (const auto& d : full.deferred) EXPECT_TRUE(payloads.contains(d.hash)) << d.hash.hex();
    EXPECT_EQ(tier_state_of(m.state->value()), tier_state::degraded);

    // Room again, and no message from anyone: the store looks for it by itself (its timer).
    disk.free();
    ASSERT_TRUE(t.step_until([](const told& l) { return !l.degraded.empty() && !l.degraded.back(); }))
        << "never said it writes again";
    EXPECT_EQ(tier_state_of(m.state->value()), tier_state::on);

    // Offered again, the deferred blocks are written.
    for (const auto& meta : full.deferred) t.actor.tell(persist{meta, payloads.at(meta.hash)});
    ASSERT_TRUE(t.step_until([](const told& l) { return l.written.size() == n; })) << "the deferred blocks were not written";
    t.system.stop();
  }
  auto reopened = segment_store::open(o);
  ASSERT_TRUE(reopened);
  for (const auto& [hash, p] : payloads) EXPECT_TRUE((*reopened)->contains(hash)) << hash.hex();
}

}  // namespace
}  // namespace strata::ssd
