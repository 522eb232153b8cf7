#pragma once
// The engine driven the way the API drives it, for the cache tests: conversations whose turns are
// submitted as soon as the previous reply is done, all conversations at once, greedy sampling.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "actors/runtime/actor_system.hpp"
#include "src/config/config.hpp"
#include "server/engine/engine.hpp"
#include "src/kv/kv_format.hpp"
#include "tests/support/temp_xdg_cache.hpp"  // engines here keep their q4_0 mean keys in a temporary folder
#include "tests/support/test_seed.hpp"

namespace strata::cache_test {

using namespace std::chrono_literals;

inline const std::string k_shared = STRATA_SHARED_DIR;

inline constexpr int k_block = 16;
inline constexpr int k_reply = 6;

struct reply {
  std::vector<std::int32_t> tokens;
  std::optional<sched::request_done> done;
  std::optional<sched::request_rejected> rejected;
};

/// Keeps each request's reply. The system is manual, stepped on the test's thread: no lock.
class collector final : public actors::actor<sched::stream_inbox> {
 public:
  explicit collector(std::shared_ptr<std::map<std::uint64_t, reply>> out) : out_(std::move(out)) {}
  void receive(sched::stream_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(sched::token_event e) {
    if (e.token >= 0) (*out_)[e.request].tokens.push_back(e.token);
  }
  void handle(sched::request_done d) { (*out_)[d.request].done = d; }
  void handle(sched::request_rejected r) { (*out_)[r.request].rejected = r; }
  void handle(sched::open_stream) {}
  void handle(sched::request_admitted) {}

 private:
  std::shared_ptr<std::map<std::uint64_t, reply>> out_;
};

using script = std::vector<std::vector<std::vector<std::int32_t>>>;  // [conversation][turn] -> user tokens

/// The answer of conversation c's turn t as the next turn's prompt holds it (a chat template may
/// trim it, and its text tokenized again need not give the tokens generated). None: as generated.
using render_answer = std::function<std::vector<std::int32_t>(int c, int t, const std::vector<std::int32_t>& reply)>;

struct turn_result {
  std::vector<std::int32_t> tokens;
  std::int32_t prompt_tokens = 0;
  std::int32_t cached_tokens = 0;
  /// Of those, the tokens restored from the SSD tier and from the host tier.
  std::int32_t ssd_cached_tokens = 0;
  std::int32_t host_cached_tokens = 0;
};

/// The cache tests' server: small pools, small blocks, prompts in several chunks.
inline config::server_config small_config(config::cache_mode mode) {
  config::server_config cfg;
  cfg.cache.mode = mode;
  cfg.cache.hot_memory = 16ull << 20;
  cfg.kv.memory = 16ull << 20;
  cfg.kv.block_tokens = k_block;
  cfg.model.compute_threads = 2;
  cfg.model.ctx = 1024;
  cfg.scheduler.token_budget = 48;  // prompts go in several chunks beside other sequences' decode
  cfg.scheduler.max_running = 8;
  return cfg;
}

/// What a test does on the running server around play()'s conversations.
struct play_hooks {
  /// After the engine started, before the first request.
  std::function<void(engine::engine&)> started;
  /// After the last reply, before the server stops; the system is manual: the hook steps it.
  std::function<void(engine::engine&, actors::actor_system&)> finished;
};

/// Plays every conversation of `user` on a fresh server with this configuration; all
/// conversations run at once, each submitting its next turn as soon as the previous one is done
/// (its prompt: the previous one, the answer as `render` gives it, and the user's next message).
/// Conversation c runs in KV format c % 3 (f16, q8_0, q4_0).
inline std::map<std::pair<int, int>, turn_result> play(const std::string& model_path, const config::server_config& cfg,
                                                       const script& user, const render_answer& render = {},
                                                       const play_hooks& hooks = {}) {
  auto loaded = engine::engine::load(cfg, model_path);
  EXPECT_TRUE(loaded) << loaded.err().message;
  if (!loaded) return {};
  auto& eng = **loaded;
  metrics::registry registry;
  // Manual: the engine's actors run on this thread when it steps them (the compute pool's threads
  // still split each step's work). The SSD tier's I/O completes outside; run_until waits for it.
  actors::actor_system system({.threads = 0});
  eng.start(system, registry);
  if (hooks.started) hooks.started(eng);
  auto out = std::make_shared<std::map<std::uint64_t, reply>>();
  auto sink = system.spawn<collector>("collector", actors::supervision::stop_system, out);

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
  /// The reply to conversation c's current turn, once it is over.
  auto finished = [&](int c) -> const reply* {
    const int t = turn[static_cast<std::size_t>(c)];
    if (t >= n_turns) return nullptr;
    auto it = out->find(id_of(c, t));
    return it != out->end() && (it->second.done || it->second.rejected) ? &it->second : nullptr;
  };
  for (int c = 0; c < n_conv; ++c) {
    prompt[static_cast<std::size_t>(c)] = user[static_cast<std::size_t>(c)][0];
    submit(c);
  }
  std::map<std::pair<int, int>, turn_result> results;
  // Step until some turn is over, then submit each finished conversation's next turn.
  const auto deadline = std::chrono::steady_clock::now() + 600s;
  while (static_cast<int>(results.size()) < n_conv * n_turns) {
    const bool progressed = system.run_until(
        [&] {
          for (int c = 0; c < n_conv; ++c)
            if (finished(c)) return true;
          return false;
        },
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    EXPECT_TRUE(progressed) << "the conversations did not end within 600 s";
    if (!progressed) break;
    for (int c = 0; c < n_conv; ++c) {
      const reply* r = finished(c);
      if (!r) continue;
      EXPECT_FALSE(r->rejected) << r->rejected->message;
      if (r->rejected) return results;
      int& t = turn[static_cast<std::size_t>(c)];
      results[{c, t}] = {r->tokens, r->done->prompt_tokens, r->done->cached_tokens, r->done->ssd_cached_tokens,
                         r->done->host_cached_tokens};
      if (++t >= n_turns) continue;
      auto& p = prompt[static_cast<std::size_t>(c)];
      const auto answer = render ? render(c, t - 1, r->tokens) : r->tokens;
      p.insert(p.end(), answer.begin(), answer.end());
      const auto& u = user[static_cast<std::size_t>(c)][static_cast<std::size_t>(t)];
      p.insert(p.end(), u.begin(), u.end());
      submit(c);
    }
  }
  if (hooks.finished) hooks.finished(eng, system);
  system.stop();
  return results;
}

inline std::vector<std::int32_t> random_tokens(std::mt19937& rng, int n, std::int32_t n_vocab) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(n_vocab));
  return t;
}


/// A test over one shared model, named by the parameter: its path, its vocabulary size, and a
/// generator seeded afresh for each run (the seed is in the trace of every failure).
class shared_model_test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = k_shared + "/models/" + GetParam() + ".gguf";
    auto m = model::model::load(path_);
    ASSERT_TRUE(m) << m.err().message;
    n_vocab_ = (*m)->hp.n_vocab;
    keeps_state_ = (*m)->hp.has_state();
    const auto seed = test_seed();
    trace_.emplace(__FILE__, __LINE__, "seed " + std::to_string(seed));
    rng_.seed(seed);
  }

  std::string path_;
  std::int32_t n_vocab_ = 0;
  /// Sliding-window (or recurrent) layers keep per-sequence state: such a model resumes only where
  /// a frozen snapshot is (every cache.snapshot_every blocks and each prompt's last block boundary).
  bool keeps_state_ = false;
  std::mt19937 rng_;
  std::optional<::testing::ScopedTrace> trace_;
};

/// The test name of a shared model: "tiny-llama-spm-f16" becomes "tiny_llama_spm_f16".
inline std::string model_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

}  // namespace strata::cache_test
