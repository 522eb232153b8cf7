// Prefix reuse on the real engine. At temperature 0 a request must produce the same tokens whether
// its prefix came from the cache or was computed. The conversations run concurrently, so one batch
// holds sequences with different prompt lengths and different hit lengths (a batch that mixed up
// per-sequence cached lengths, positions or block tables would change their tokens), and two
// conversations share their first message, so live blocks are shared across sequences too.
// Conversations use every KV format (kv_bits 16, 8, 4) side by side; a third conversation has the
// same first message in another format, and must not match the others' blocks.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/cache/harness.hpp"

namespace strata {
namespace {

using namespace cache_test;

class prefix_cache : public shared_model_test {};

TEST_P(prefix_cache, multi_turn_conversations_give_the_same_tokens_with_and_without_hits) {
  constexpr int n_conv = 5, n_turns = 3;
  script user(n_conv);
  for (auto& conv : user) {
    conv.push_back(random_tokens(rng_, 10 + static_cast<int>(rng_() % 60), n_vocab_));
    for (int t = 1; t < n_turns; ++t) conv.push_back(random_tokens(rng_, 1 + static_cast<int>(rng_() % 40), n_vocab_));
  }
  // Conversation c runs in format c % 3: 0 and 3 are f16, 1 and 4 q8_0, 2 q4_0.
  user[3][0] = user[0][0];  // a shared first message: its blocks are shared while both run
  user[1][0] = user[0][0];  // the same message in q8_0: never matches the f16 blocks

  auto cold = play(path_, small_config(config::cache_mode::off), user);
  auto warm = play(path_, small_config(config::cache_mode::hot), user);
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
      EXPECT_LT(b.cached_tokens, b.prompt_tokens);
      if (t > 0) {
        // Everything the previous turn computed (its prompt and reply but the last token) is
        // still cached, the full blocks and the tokens of the last one: the pool is large enough
        // that nothing was evicted. Conversations 0 and 3 share their first message, and so their
        // first reply: one may also find blocks that the other computed since.
        const int before = cold.at({c, t - 1}).prompt_tokens + k_reply - 1;
        if (keeps_state_) {
          // It resumes from the snapshot at the previous prompt's last block boundary (or a deeper one).
          const int boundary = cold.at({c, t - 1}).prompt_tokens / k_block * k_block;
          EXPECT_GE(b.cached_tokens, boundary) << "conversation " << c << " turn " << t;
          // 0 and 3 may resume past `before`: one's next prompt holds their shared first reply
          // whole, its last token too, and leaves a snapshot at a block boundary inside it.
          if (c != 0 && c != 3) {
            EXPECT_LE(b.cached_tokens, before) << "conversation " << c << " turn " << t;
          }
        } else if (c == 0 || c == 3) {
          EXPECT_GE(b.cached_tokens, before) << "conversation " << c << " turn " << t;
        } else {
          EXPECT_EQ(b.cached_tokens, before) << "conversation " << c << " turn " << t;
        }
      } else if (c == 1) {
        EXPECT_EQ(b.cached_tokens, 0) << "q8_0 blocks matched f16 ones";
      }
      hits += b.cached_tokens > 0;
    }
  }
  EXPECT_GE(hits, n_conv * (n_turns - 1) / 2);
}

// The chat-turn shape: the second prompt is the first one, the answer, and a new user message.
// A chat template renders the answer anew (it may trim it; its text tokenized again need not give
// the tokens generated), so the second prompt may part from what the first turn generated a few
// tokens into the answer, inside the block where the first prompt ended, which generation went on
// to fill. Every token the two share (but the last, always computed) must come from the cache, not
// only the whole blocks before the divergence, and give the tokens of a run without the cache.
class chat_turn : public shared_model_test {};

TEST_P(chat_turn, the_next_turn_reuses_every_token_it_shares_with_the_answer_as_generated) {
  if (keeps_state_)
    GTEST_SKIP() << "resumes only at snapshot boundaries, not inside a block: tests/e2e/test_sliding_window.py, "
                    "test_hybrid_snapshots*.py and server/engine/stages.test.cpp cover models with per-sequence state";
  constexpr int n_conv = 6;
  // Conversation c's first prompt ends short_of(c) tokens before a block boundary (the reply of
  // k_reply tokens fills that block and goes on), and the second prompt keeps keep(c) < short_of(c)
  // generated tokens, then holds one the model did not generate.
  auto short_of = [](int c) { return 1 + c % 5; };
  auto keep = [&](int c) { return (c * 7) % short_of(c); };
  static_assert(k_reply > 5);
  script user(n_conv);
  for (int c = 0; c < n_conv; ++c) {
    const int blocks = 1 + static_cast<int>(rng_() % 4);
    user[static_cast<std::size_t>(c)].push_back(random_tokens(rng_, blocks * k_block + k_block - short_of(c), n_vocab_));
    user[static_cast<std::size_t>(c)].push_back(random_tokens(rng_, 1 + static_cast<int>(rng_() % 20), n_vocab_));
  }
  const std::int32_t n_vocab = n_vocab_;
  const render_answer render = [&](int c, int, const std::vector<std::int32_t>& reply) {
    std::vector<std::int32_t> answer(reply.begin(), reply.begin() + keep(c));
    answer.push_back((reply[static_cast<std::size_t>(keep(c))] + 1) % n_vocab);
    return answer;
  };
  auto cold = play(path_, small_config(config::cache_mode::off), user, render);
  auto warm = play(path_, small_config(config::cache_mode::hot), user, render);
  ASSERT_EQ(cold.size(), static_cast<std::size_t>(n_conv * 2));
  ASSERT_EQ(warm.size(), cold.size());
  for (int c = 0; c < n_conv; ++c) {
    const auto& first = user[static_cast<std::size_t>(c)][0];
    const auto& reply = cold.at({c, 0}).tokens;
    const auto shared = static_cast<int>(first.size()) + keep(c);  // then the token not generated
    const auto& b = warm.at({c, 1});
    EXPECT_EQ(b.tokens, cold.at({c, 1}).tokens) << "conversation " << c;
    EXPECT_EQ(warm.at({c, 0}).tokens, reply) << "conversation " << c;
    // The first turn computed its prompt and all but the last of its k_reply tokens: past the
    // block boundary, so the block holding the shared tokens' end is a full one.
    ASSERT_GT(static_cast<int>(first.size()) + k_reply - 1, shared / k_block * k_block + k_block - 1);
    EXPECT_EQ(b.cached_tokens, shared) << "conversation " << c << " (the whole blocks hold " << shared / k_block * k_block
                                      << " of the " << shared << " tokens shared)";
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, chat_turn,
                         ::testing::Values("tiny-llama-spm-f16", "tiny-gemma2-spm-f16", "small-llama-spm-q8_0"),
                         model_test_name);

std::vector<std::string> shared_models() {
  return {"tiny-llama-spm-f16",   "tiny-qwen2-gpt2-f16",         "tiny-qwen3-starcoder-f16",    "tiny-gemma2-spm-f16",
          "small-llama-spm-q8_0", "small-llama-spm-q4_0",        "small-llama-spm-q4_k_m",      "small-llama-spm-q5_k_m",
          "small-llama-spm-q6_k"};
}

INSTANTIATE_TEST_SUITE_P(shared_models, prefix_cache, ::testing::ValuesIn(shared_models()), model_test_name);

}  // namespace
}  // namespace strata
