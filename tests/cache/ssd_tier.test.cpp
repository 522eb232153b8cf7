// The SSD tier on the real engine. A server in tiered mode writes every filled block to its
// segment files; a new server on the same directory (a restart: its RAM tier is empty) must find
// the prompts' prefixes there and give exactly the tokens of a server with no cache at all. Then
// the files are damaged (bit flips, zeroed ranges, a truncated segment): a damaged record is a
// miss, computed again, and the tokens stay the same.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "io/ssd/small_disk.test.hpp"
#include "tests/cache/harness.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_seed.hpp"

namespace strata {
namespace {

using namespace cache_test;
namespace fs = std::filesystem;

using test_support::temp_dir;

std::vector<fs::path> segments(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".kv") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

config::server_config tiered(const fs::path& dir) {
  auto cfg = small_config(config::cache_mode::tiered);
  cfg.cache.dir = dir.string();
  return cfg;
}

void expect_same_tokens(const std::map<std::pair<int, int>, turn_result>& want, const std::map<std::pair<int, int>, turn_result>& got,
                        const std::string& run) {
  ASSERT_EQ(got.size(), want.size()) << run;
  for (const auto& [key, a] : want) {
    const auto& b = got.at(key);
    EXPECT_EQ(b.tokens, a.tokens) << run << ": conversation " << key.first << " turn " << key.second << " (cached "
                                  << b.cached_tokens << " of " << b.prompt_tokens << ")";
  }
}

class ssd_tier : public shared_model_test {};

/// What a first turn of `prompt` tokens reuses from the SSD after a run that computed it and all
/// but the last of its k_reply generated tokens: the full blocks before its last token, and when
/// the run's last, partly filled block (its tail) starts right after them, the tokens up to its
/// last one too.
int restored_first_turn(int prompt) {
  const int full = (prompt - 1) / k_block * k_block;
  const int tail = (prompt + k_reply - 1) / k_block * k_block;
  return tail == full ? prompt - 1 : full;
}

TEST_P(ssd_tier, a_restarted_server_restores_prefixes_from_the_ssd_and_gives_the_same_tokens) {
  if (keeps_state_)
    GTEST_SKIP() << "resumes only at snapshot boundaries, not inside a block: tests/e2e/test_sliding_window.py, "
                    "test_hybrid_snapshots*.py and server/engine/stages.test.cpp cover models with per-sequence state";
  constexpr int n_conv = 4, n_turns = 2;
  script user(n_conv);
  for (auto& conv : user) {
    conv.push_back(random_tokens(rng_, 40 + static_cast<int>(rng_() % 50), n_vocab_));
    conv.push_back(random_tokens(rng_, 1 + static_cast<int>(rng_() % 30), n_vocab_));
  }
  user[3][0] = user[0][0];  // two f16 conversations with the same first message

  temp_dir tmp;
  const fs::path kv_dir = tmp.path / "kv";
  auto cold = play(path_, small_config(config::cache_mode::off), user);
  ASSERT_EQ(cold.size(), static_cast<std::size_t>(n_conv * n_turns));

  auto first = play(path_, tiered(tmp.path), user);
  expect_same_tokens(cold, first, "first tiered server");
  ASSERT_FALSE(segments(kv_dir).empty()) << "nothing was written to " << kv_dir;

  // A new server: its RAM is empty, so every hit on a first turn comes from the SSD.
  auto second = play(path_, tiered(tmp.path), user);
  expect_same_tokens(cold, second, "restarted server");
  for (int c = 0; c < n_conv; ++c) {
    const auto& r = second.at({c, 0});
    EXPECT_EQ(r.cached_tokens, restored_first_turn(r.prompt_tokens)) << "conversation " << c << ": first turn after restart";
  }

  // Damage every segment: flip bits in a few places, zero a range, and cut the last one short.
  auto files = segments(kv_dir);
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    const auto size = fs::file_size(f);
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    for (int i = 0; i < 8; ++i) {
      const auto at = static_cast<std::streamoff>(rng_() % size);
      io.seekg(at);
      char b = 0;
      io.read(&b, 1);
      b = static_cast<char>(b ^ (1 << (rng_() % 8)));
      io.seekp(at);
      io.write(&b, 1);
    }
    const std::string zeros(4096, '\0');
    io.seekp(static_cast<std::streamoff>(rng_() % size));
    io.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  fs::resize_file(files.back(), fs::file_size(files.back()) / 2);
  auto damaged = play(path_, tiered(tmp.path), user);
  expect_same_tokens(cold, damaged, "server on damaged segments");

  // Whatever the damaged run computed again was written again: a further restart hits it all.
  auto healed = play(path_, tiered(tmp.path), user);
  expect_same_tokens(cold, healed, "server after the damaged run");
  for (int c = 0; c < n_conv; ++c) {
    const auto& r = healed.at({c, 0});
    EXPECT_EQ(r.cached_tokens, restored_first_turn(r.prompt_tokens)) << "conversation " << c << ": after the damaged run";
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, ssd_tier,
                         ::testing::Values("tiny-llama-spm-f16", "tiny-gemma2-spm-f16", "small-llama-spm-q8_0"),
                         model_test_name);

/// Waits until `done` holds (true) or 30 s pass (false).
template <class Pred>
bool within_30s(actors::actor_system& system, Pred done) {
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
    if (done()) return true;
    system.run_until([] { return false; }, 10ms);  // delivers what comes within 10 ms
  }
  return false;
}

TEST(ssd_tier_modes, blocks_computed_while_the_disk_was_full_are_written_once_it_has_room) {
  temp_dir tmp;
  ssd::testing::small_disk disk(tmp.path);
  if (!disk.unavailable().empty()) GTEST_SKIP() << disk.unavailable();
  const auto seed = strata::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::string model = k_shared + "/models/tiny-llama-spm-f16.gguf";
  script user{{random_tokens(rng, 70, 256)}, {random_tokens(rng, 90, 256)}};

  play_hooks hooks;
  hooks.started = [&](engine::engine&) { disk.fill(); };  // the store is open: now the disk is full
  hooks.finished = [&](engine::engine& e, actors::actor_system& system) {
    // The refused writes complete on the ring, outside the (manual) system: step until they are in.
    EXPECT_TRUE(within_30s(system, [&] { return e.ssd_state() == ssd::tier_state::degraded; }))
        << "the full disk went unnoticed";
    disk.free();
    // Nothing more is asked of the server: it finds the room by itself and writes what it kept.
    ASSERT_TRUE(within_30s(system, [&] { return e.ssd_state() == ssd::tier_state::on; })) << "writing never resumed";
    double records = -1;
    auto last_change = std::chrono::steady_clock::now();
    ASSERT_TRUE(within_30s(system, [&] {
      const double now = e.ssd_stats()->records->value();
      if (now != records) {
        records = now;
        last_change = std::chrono::steady_clock::now();
      }
      return std::chrono::steady_clock::now() - last_change > 1s;
    }));
    EXPECT_EQ(e.ssd_stats()->blocks_lost->value(), 0u);
  };
  auto first = play(model, tiered(disk.path()), user, {}, hooks);
  ASSERT_EQ(first.size(), user.size());

  // A restarted server (its RAM empty) restores every prompt's prefix from the SSD.
  auto second = play(model, tiered(disk.path()), user);
  ASSERT_EQ(second.size(), user.size());
  for (std::size_t c = 0; c < user.size(); ++c) {
    const auto& r = second.at({static_cast<int>(c), 0});
    EXPECT_EQ(r.tokens, first.at({static_cast<int>(c), 0}).tokens);
    EXPECT_EQ(r.cached_tokens, restored_first_turn(r.prompt_tokens)) << "conversation " << c;
  }
}

TEST(ssd_tier_modes, hot_mode_creates_no_directory_and_opens_no_file) {
  temp_dir tmp;
  const fs::path dir = tmp.path / "never";
  auto cfg = small_config(config::cache_mode::hot);
  cfg.cache.dir = dir.string();
  std::mt19937 rng(test_seed());
  script user{{random_tokens(rng, 70, 256), random_tokens(rng, 5, 256)}};
  auto r = play(k_shared + "/models/tiny-llama-spm-f16.gguf", cfg, user);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_GT(r.at({0, 1}).cached_tokens, 0) << "the hot tier reused nothing";
  EXPECT_FALSE(fs::exists(dir)) << dir << " was created in hot mode";
}

}  // namespace
}  // namespace strata
