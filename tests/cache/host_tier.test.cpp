// The host tier on the real engine. The KV pool keeps no cached block at all (cache.hot_memory =
// 0): every block a finished turn lets go leaves it at once, copied out to the host tier, and the
// next turn must get it back from there and give exactly the tokens of a server with no cache,
// in cache.mode hot and tiered. A host tier of a few blocks stays within its budget, and what it
// lets go is computed again (hot) or read from the SSD (tiered), with the same tokens.

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tests/cache/harness.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_seed.hpp"

namespace strata {
namespace {

using namespace cache_test;
namespace fs = std::filesystem;

using test_support::temp_dir;

config::server_config with_host_tier(config::cache_mode mode, std::uint64_t host_memory, const fs::path& dir) {
  auto cfg = small_config(mode);
  cfg.cache.hot_memory = 0;  // the pool caches nothing: what a sequence lets go leaves it at once
  cfg.cache.host_memory = host_memory;
  cfg.cache.dir = dir.string();
  return cfg;
}

class host_tier : public shared_model_test {
 protected:
  /// Conversations of three turns, no two alike.
  script conversations() {
    script user(4);
    for (auto& conv : user) {
      conv.push_back(random_tokens(rng_, 20 + static_cast<int>(rng_() % 60), n_vocab_));
      conv.push_back(random_tokens(rng_, 1 + static_cast<int>(rng_() % 30), n_vocab_));
      conv.push_back(random_tokens(rng_, 1 + static_cast<int>(rng_() % 30), n_vocab_));
    }
    return user;
  }
  /// One f16 KV block of this model (every layer, K and V).
  std::uint64_t block_bytes() const {
    auto m = model::model::load(path_);
    return static_cast<std::uint64_t>(m ? (*m)->hp.kv_dim() * 2 * k_block * 2 * (*m)->hp.n_layer : 0);
  }
};

void expect_same_tokens(const std::map<std::pair<int, int>, turn_result>& want, const std::map<std::pair<int, int>, turn_result>& got,
                        const std::string& run) {
  ASSERT_EQ(got.size(), want.size()) << run;
  for (const auto& [key, a] : want) {
    const auto& b = got.at(key);
    EXPECT_EQ(b.tokens, a.tokens) << run << ": conversation " << key.first << " turn " << key.second << " (cached "
                                  << b.cached_tokens << " of " << b.prompt_tokens << ", " << b.host_cached_tokens
                                  << " from the host tier)";
  }
}

TEST_P(host_tier, a_turn_whose_prefix_left_the_pool_gets_it_back_from_the_host_tier_with_the_same_tokens) {
  if (keeps_state_) GTEST_SKIP() << "a model with per-sequence state keeps no host tier (it resumes only at a snapshot)";
  const script user = conversations();
  auto cold = play(path_, small_config(config::cache_mode::off), user);
  ASSERT_EQ(cold.size(), 12u);
  for (auto mode : {config::cache_mode::hot, config::cache_mode::tiered}) {
    temp_dir tmp;
    const std::string run = std::string("cache.mode ") + std::string(config::to_string(mode));
    double host_bytes = -1;
    play_hooks hooks;
    hooks.finished = [&](engine::engine& e, actors::actor_system&) {
      ASSERT_NE(e.host_stats(), nullptr) << run;
      host_bytes = e.host_stats()->bytes->value();
      EXPECT_GT(e.stats().host_hit_tokens->value(), 0u) << run;
    };
    auto got = play(path_, with_host_tier(mode, 64ull << 20, tmp.path), user, {}, hooks);
    expect_same_tokens(cold, got, run);
    EXPECT_GT(host_bytes, 0) << run;
    for (const auto& [key, r] : got) {
      if (key.second == 0) continue;
      // Every token the last turn computed (its prompt and all but the last of its answer) came
      // back, from the host tier alone: the pool kept none, and the host tier is tried first.
      const int computed = got.at({key.first, key.second - 1}).prompt_tokens + k_reply - 1;
      EXPECT_EQ(r.cached_tokens, computed) << run << ": conversation " << key.first << " turn " << key.second;
      EXPECT_EQ(r.host_cached_tokens, r.cached_tokens) << run << ": conversation " << key.first << " turn " << key.second;
      EXPECT_EQ(r.ssd_cached_tokens, 0) << run;
    }
  }
}

TEST_P(host_tier, a_host_tier_of_a_few_blocks_holds_its_budget_and_what_it_let_go_is_computed_or_read_from_the_ssd) {
  if (keeps_state_) GTEST_SKIP() << "a model with per-sequence state keeps no host tier (it resumes only at a snapshot)";
  const script user = conversations();
  auto cold = play(path_, small_config(config::cache_mode::off), user);
  ASSERT_EQ(cold.size(), 12u);
  const std::uint64_t budget = 5 * block_bytes();
  ASSERT_GT(budget, 0u);
  for (auto mode : {config::cache_mode::hot, config::cache_mode::tiered}) {
    temp_dir tmp;
    const std::string run = std::string("cache.mode ") + std::string(config::to_string(mode));
    play_hooks hooks;
    hooks.finished = [&](engine::engine& e, actors::actor_system&) {
      ASSERT_NE(e.host_stats(), nullptr) << run;
      EXPECT_LE(e.host_stats()->bytes->value(), static_cast<double>(budget)) << run;
      EXPECT_GT(e.host_stats()->evictions->value(), 0u) << run << ": the conversations hold more than five blocks";
      EXPECT_EQ(e.host_budget(), static_cast<std::int64_t>(budget));
    };
    auto got = play(path_, with_host_tier(mode, budget, tmp.path), user, {}, hooks);
    expect_same_tokens(cold, got, run);
    for (const auto& [key, r] : got) {
      if (key.second == 0) continue;
      const int computed = got.at({key.first, key.second - 1}).prompt_tokens + k_reply - 1;
      EXPECT_LE(r.cached_tokens, computed) << run;
      // The pool kept nothing: whatever was cached came from a lower tier.
      EXPECT_EQ(r.host_cached_tokens + r.ssd_cached_tokens, r.cached_tokens) << run;
      if (mode == config::cache_mode::hot) {
        EXPECT_EQ(r.ssd_cached_tokens, 0) << run;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, host_tier, ::testing::Values("tiny-llama-spm-f16", "tiny-qwen2-gpt2-f16"), model_test_name);

TEST(host_tier_config, a_budget_below_one_block_fails_the_load_with_a_message_naming_the_key) {
  temp_dir tmp;
  auto cfg = with_host_tier(config::cache_mode::hot, 1000, tmp.path);
  auto loaded = engine::engine::load(cfg, k_shared + "/models/tiny-llama-spm-f16.gguf");
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.err().message.find("cache.host_memory"), std::string::npos) << loaded.err().message;
}

TEST(host_tier_config, the_cpu_keeps_no_host_tier_unless_asked_and_the_gpu_default_is_on) {
  temp_dir tmp;
  auto cfg = small_config(config::cache_mode::hot);
  cfg.cache.dir = tmp.path.string();
  auto loaded = engine::engine::load(cfg, k_shared + "/models/tiny-llama-spm-f16.gguf");
  ASSERT_TRUE(loaded) << loaded.err().message;
  EXPECT_EQ((*loaded)->host_budget(), 0);
  cfg.model.device = "cuda";
  EXPECT_GT(cfg.host_memory_bytes(), 0u);
}

}  // namespace
}  // namespace strata
