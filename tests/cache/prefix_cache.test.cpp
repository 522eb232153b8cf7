// Prefix reuse on the real engine. At temperature 0 a request must produce the same tokens whether
// its prefix came from the cache or was computed. The conversations run concurrently, so one batch
// holds sequences with different prompt lengths and different hit lengths (a batch that mixed up
// per-sequence cached lengths, positions or block tables would change their tokens), and two
// conversations share their first message, so live blocks are shared across sequences too.
// Conversations use every KV format (kv_bits 16, 8, 4) side by side; a third conversation has the
// same first message in another format, and must not match the others' blocks.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "actors/runtime/actor_system.hpp"
#include "src/engine/engine.hpp"
#include "src/kv/kv_format.hpp"

namespace strata {
namespace {

using namespace std::chrono_literals;

#define k_shared std::string(STRATA_SHARED_DIR)

constexpr int k_block = 16;
constexpr int k_reply = 6;

struct reply {
  std::vector<std::int32_t> tokens;
  std::optional<sched::request_done> done;
  std::optional<sched::request_rejected> rejected;
};

class collector final : public actors::actor<sched::stream_inbox> {
 public:
  collector(std::shared_ptr<std::mutex> mu, std::shared_ptr<std::map<std::uint64_t, reply>> out)
      : mu_(std::move(mu)), out_(std::move(out)) {}
  void receive(sched::stream_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(sched::token_event e) {
    std::lock_guard lock(*mu_);
    if (e.token >= 0) (*out_)[e.request].tokens.push_back(e.token);
  }
  void handle(sched::request_done d) {
    std::lock_guard lock(*mu_);
    (*out_)[d.request].done = d;
  }
  void handle(sched::request_rejected r) {
    std::lock_guard lock(*mu_);
    (*out_)[r.request].rejected = r;
  }
  void handle(sched::open_stream) {}

 private:
  std::shared_ptr<std::mutex> mu_;
  std::shared_ptr<std::map<std::uint64_t, reply>> out_;
};

using script = std::vector<std::vector<std::vector<std::int32_t>>>;  // [conversation][turn] -> user tokens

struct turn_result {
  std::vector<std::int32_t> tokens;
  std::int32_t prompt_tokens = 0;
  std::int32_t cached_tokens = 0;
};

/// Plays every conversation of `user` on a fresh server with the given cache mode; all
/// conversations run at once, each submitting its next turn as soon as the previous one is done.
std::map<std::pair<int, int>, turn_result> play(const std::string& model_path, config::cache_mode mode, const script& user) {
  config::server_config cfg;
  cfg.cache.mode = mode;
  cfg.cache.hot_memory = 16ull << 20;
  cfg.kv.memory = 16ull << 20;
  cfg.kv.block_tokens = k_block;
  cfg.model.compute_threads = 2;
  cfg.model.ctx = 1024;
  cfg.scheduler.token_budget = 48;  // prompts go in several chunks beside other sequences' decode
  cfg.scheduler.max_running = 8;
  auto loaded = engine::engine::load(cfg, model_path);
  EXPECT_TRUE(loaded) << loaded.err().message;
  if (!loaded) return {};
  auto& eng = **loaded;
  metrics::registry registry;
  actors::actor_system system({.threads = 2});
  eng.start(system, registry);
  auto mu = std::make_shared<std::mutex>();
  auto out = std::make_shared<std::map<std::uint64_t, reply>>();
  auto sink = system.spawn<collector>("collector", actors::supervision::stop_system, mu, out);

  const int n_conv = static_cast<int>(user.size());
  const int n_turns = static_cast<int>(user[0].size());
  auto id_of = [](int c, int t) { return static_cast<std::uint64_t>(c * 100 + t + 1); };
  std::vector<std::vector<std::int32_t>> prompt(static_cast<std::size_t>(n_conv));
  std::vector<int> turn(static_cast<std::size_t>(n_conv), 0);
  auto submit = [&](int c) {
    sched::generation_settings g;
    g.sampling.temperature = 0.0f;
    g.max_tokens = k_reply;
    g.ignore_eos = true;
    g.kv_format = kv::k_kv_formats[static_cast<std::size_t>(c) % kv::k_kv_formats.size()];
    eng.scheduler().tell(sched::submit{id_of(c, turn[static_cast<std::size_t>(c)]), prompt[static_cast<std::size_t>(c)], g, sink});
  };
  for (int c = 0; c < n_conv; ++c) {
    prompt[static_cast<std::size_t>(c)] = user[static_cast<std::size_t>(c)][0];
    submit(c);
  }
  std::map<std::pair<int, int>, turn_result> results;
  const auto deadline = std::chrono::steady_clock::now() + 600s;
  while (static_cast<int>(results.size()) < n_conv * n_turns && std::chrono::steady_clock::now() < deadline) {
    for (int c = 0; c < n_conv; ++c) {
      int& t = turn[static_cast<std::size_t>(c)];
      if (t >= n_turns) continue;
      reply r;
      {
        std::lock_guard lock(*mu);
        auto it = out->find(id_of(c, t));
        if (it == out->end() || (!it->second.done && !it->second.rejected)) continue;
        r = it->second;
      }
      EXPECT_FALSE(r.rejected) << r.rejected->message;
      if (r.rejected) return results;
      results[{c, t}] = {r.tokens, r.done->prompt_tokens, r.done->cached_tokens};
      if (++t >= n_turns) continue;
      auto& p = prompt[static_cast<std::size_t>(c)];
      p.insert(p.end(), r.tokens.begin(), r.tokens.end());
      const auto& u = user[static_cast<std::size_t>(c)][static_cast<std::size_t>(t)];
      p.insert(p.end(), u.begin(), u.end());
      submit(c);
    }
    std::this_thread::sleep_for(2ms);
  }
  system.stop();
  return results;
}

std::vector<std::int32_t> random_tokens(std::mt19937& rng, int n, std::int32_t n_vocab) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(n_vocab));
  return t;
}

class prefix_cache : public ::testing::TestWithParam<std::string> {};

TEST_P(prefix_cache, multi_turn_conversations_give_the_same_tokens_with_and_without_hits) {
  const std::string path = k_shared + "/models/" + GetParam() + ".gguf";
  auto m = model::model::load(path);
  ASSERT_TRUE(m) << m.err().message;
  const std::int32_t n_vocab = (*m)->hp.n_vocab;
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);

  constexpr int n_conv = 5, n_turns = 3;
  script user(n_conv);
  for (auto& conv : user) {
    conv.push_back(random_tokens(rng, 10 + static_cast<int>(rng() % 60), n_vocab));
    for (int t = 1; t < n_turns; ++t) conv.push_back(random_tokens(rng, 1 + static_cast<int>(rng() % 40), n_vocab));
  }
  // Conversation c runs in format c % 3: 0 and 3 are f16, 1 and 4 q8_0, 2 q4_0.
  user[3][0] = user[0][0];  // a shared first message: its blocks are shared while both run
  user[1][0] = user[0][0];  // the same message in q8_0: never matches the f16 blocks

  auto cold = play(path, config::cache_mode::off, user);
  auto warm = play(path, config::cache_mode::hot, user);
  ASSERT_EQ(cold.size(), static_cast<std::size_t>(n_conv * n_turns));
  ASSERT_EQ(warm.size(), cold.size());
  int hits = 0;
  for (int c = 0; c < n_conv; ++c) {
    for (int t = 0; t < n_turns; ++t) {
      const auto& a = cold.at({c, t});
      const auto& b = warm.at({c, t});
      ASSERT_EQ(b.tokens, a.tokens) << "conversation " << c << " turn " << t << " (cached " << b.cached_tokens << " of "
                                    << b.prompt_tokens << ")";
      EXPECT_EQ(a.cached_tokens, 0);
      EXPECT_EQ(b.prompt_tokens, a.prompt_tokens);
      EXPECT_EQ(b.cached_tokens % k_block, 0);
      EXPECT_LT(b.cached_tokens, b.prompt_tokens);
      if (t > 0) {
        // Everything the previous turn computed (its prompt and reply but the last token) is
        // still cached: the pool is large enough that nothing was evicted. Conversations 0 and 3
        // share their first message, and so their first reply: one may also find blocks that
        // the other computed since.
        const int before = (cold.at({c, t - 1}).prompt_tokens + k_reply - 1) / k_block * k_block;
        if (c == 0 || c == 3) EXPECT_GE(b.cached_tokens, before) << "conversation " << c << " turn " << t;
        else EXPECT_EQ(b.cached_tokens, before) << "conversation " << c << " turn " << t;
      } else if (c == 1) {
        EXPECT_EQ(b.cached_tokens, 0) << "q8_0 blocks matched f16 ones";
      }
      hits += b.cached_tokens > 0;
    }
  }
  EXPECT_GE(hits, n_conv * (n_turns - 1) / 2);
}

std::vector<std::string> shared_models() {
  return {"tiny-llama-spm-f16",   "tiny-qwen2-gpt2-f16",         "tiny-qwen3-starcoder-f16",    "tiny-gemma2-spm-f16",
          "small-llama-spm-q8_0", "small-llama-spm-q4_0",        "small-llama-spm-q4_k_m",      "small-llama-spm-q5_k_m",
          "small-llama-spm-q6_k"};
}

INSTANTIATE_TEST_SUITE_P(shared_models, prefix_cache, ::testing::ValuesIn(shared_models()), [](const auto& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
});

}  // namespace
}  // namespace strata
