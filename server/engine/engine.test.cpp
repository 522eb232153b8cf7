// The engine as the composition root: load() a tiny shared model, start() its actors on a manual
// actor_system, and one submit comes back as tokens and a request_done, with the tokens a plain
// session decodes greedily from the same prompt.

#include "server/engine/engine.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/compute_pool.hpp"
#include "src/model/session.hpp"
#include "tests/support/probe_actor.hpp"
#include "tests/support/temp_xdg_cache.hpp"  // engines here keep their q4_0 mean keys in a temporary folder
#include "tests/support/test_seed.hpp"

namespace strata::engine {
namespace {

const std::string k_model = std::string(STRATA_SHARED_DIR) + "/models/tiny-llama-spm-f16.gguf";

/// Below this gap between the two best logits, a sum taken in another order (the engine's steps
/// against the session's) may pick the other token: the comparison stops there.
constexpr float k_near_tie = 1e-2f;

config::server_config small_config() {
  config::server_config cfg;
  cfg.cache.mode = config::cache_mode::off;
  cfg.kv.memory = 16ull << 20;
  cfg.kv.block_tokens = 16;
  cfg.model.compute_threads = 2;
  cfg.model.ctx = 256;
  cfg.scheduler.token_budget = 48;  // the prompt below goes in two steps
  return cfg;
}

struct greedy_step {
  std::int32_t token;
  float margin;  // best logit minus the second best
};

/// Greedy decoding of `n` tokens after `prompt` on a session of its own.
std::vector<greedy_step> reference(const std::vector<std::int32_t>& prompt, int n) {
  auto m = model::model::load(k_model);
  EXPECT_TRUE(m) << m.err().message;
  if (!m) return {};
  kernels::compute_pool pool(2);
  model::session s(*m, pool, 256, 16);
  std::vector<greedy_step> out;
  std::vector<std::int32_t> next = prompt;
  for (int i = 0; i < n; ++i) {
    auto logits = s.append(next, false);
    EXPECT_TRUE(logits) << logits.err().message;
    if (!logits) return out;
    std::vector<float> sorted = *logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const auto best = static_cast<std::int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    out.push_back({best, sorted[0] - sorted[1]});
    next = {best};
  }
  return out;
}

TEST(engine, a_cuda_device_that_cannot_be_used_fails_the_load_with_a_message_naming_it) {
  // Built without CUDA, or with it but on a machine without a GPU (CI), --device cuda cannot
  // start: the load fails and says why, rather than serving on the CPU unasked.
  auto cfg = small_config();
  cfg.model.device = "cuda";
  auto loaded = engine::load(cfg, k_model);
  if (loaded) GTEST_SKIP() << "a usable CUDA device is present";
  EXPECT_EQ(loaded.err().code, errc::unsupported);
  EXPECT_NE(loaded.err().message.find("--device cuda"), std::string::npos) << loaded.err().message;
}

TEST(engine, load_and_start_wire_the_actors_so_that_a_submit_streams_greedy_tokens_and_ends) {
  auto loaded = engine::load(small_config(), k_model);
  ASSERT_TRUE(loaded) << loaded.err().message;
  engine& e = **loaded;
  const int n_layer = e.mdl().hp.n_layer;

  metrics::registry registry;
  actors::actor_system system({.threads = 0});
  e.start(system, registry);
  EXPECT_GE(system.actor_count(), static_cast<std::size_t>(n_layer + 2)) << "a layer actor per layer, the output stage, the scheduler";
  auto stream = test_support::make_probe_log<sched::stream_inbox>();
  auto sink = system.spawn<test_support::probe_actor<sched::stream_inbox>>("stream", actors::supervision::stop_system, stream);

  std::mt19937 rng(test_seed());
  std::vector<std::int32_t> prompt(70);
  for (auto& t : prompt) t = 3 + static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(e.mdl().hp.n_vocab - 3));
  constexpr int n = 8;
  sched::generation_settings g;
  g.sampling.temperature = 0.0f;
  g.max_tokens = n;
  g.ignore_eos = true;
  e.scheduler().tell(sched::submit{1, prompt, g, sink});
  EXPECT_TRUE(stream->empty());
  const std::size_t delivered = system.run_all();
  // Each step is a message to every layer, the output stage and the scheduler: n + 1 steps (the
  // prompt takes two) at least.
  EXPECT_GE(delivered, static_cast<std::size_t>((n + 1) * (n_layer + 2)));

  std::vector<std::int32_t> tokens;
  for (const auto* t : test_support::received<sched::token_event>(stream)) {
    EXPECT_EQ(t->request, 1u);
    if (t->token >= 0) tokens.push_back(t->token);
  }
  auto done = test_support::received<sched::request_done>(stream);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->reason, sched::finish_reason::length);
  EXPECT_EQ(done[0]->prompt_tokens, 70);
  EXPECT_EQ(done[0]->completion_tokens, n);
  EXPECT_TRUE(test_support::received<sched::request_rejected>(stream).empty());
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(e.stats().kv_blocks_used->value(), 0.0) << "the finished request's blocks went back";

  const auto want = reference(prompt, n);
  ASSERT_EQ(want.size(), static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i].margin < k_near_tie) break;
    EXPECT_EQ(tokens[i], want[i].token) << "token " << i;
    if (tokens[i] != want[i].token) break;  // what follows continues from another sequence
  }
  system.stop();
}

TEST(KvBits, TheGpuTakesQ8KvForHeadsOfWholeBlocksAndRefusesQ4ForTheGpusReason) {
  EXPECT_EQ(kv_bits_problem(8, true, 128, 8), "");
  EXPECT_NE(kv_bits_problem(8, true, 48, 8).find("multiple of 32"), std::string::npos);
  // Without kv.default_bits = 8 the GPU reserves no q8_0 pool, and says so.
  const std::string no_pool = kv_bits_problem(8, true, 128, 16);
  EXPECT_NE(no_pool.find("kv.default_bits = 8"), std::string::npos) << no_pool;
  EXPECT_EQ(kv_bits_problem(8, false, 128, 16), "");
  const std::string why = kv_bits_problem(4, true, 128);
  EXPECT_NE(why.find("GPU"), std::string::npos) << why;
  EXPECT_EQ(why.find("multiple of"), std::string::npos) << why;
  EXPECT_EQ(kv_bits_problem(16, true, 128), "");
}

TEST(KvBits, TheCpuTakesQuantizedKvOnlyForHeadsOfWholeBlocks) {
  EXPECT_EQ(kv_bits_problem(8, false, 128), "");
  EXPECT_EQ(kv_bits_problem(4, false, 64), "");
  EXPECT_NE(kv_bits_problem(8, false, 48).find("multiple of 32"), std::string::npos);
  EXPECT_NE(kv_bits_problem(5, false, 128), "");
}

}  // namespace
}  // namespace strata::engine
