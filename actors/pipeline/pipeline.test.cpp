// The pipeline's actors (three layer actors and the output stage) on the manual executor, with
// stand-in computations that record what they were asked to do. A probe plays the scheduler: the
// steps carry its port, and it opens and closes samplers at the output stage directly.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/pipeline/layer_actor.hpp"
#include "actors/pipeline/output_actor.hpp"
#include "actors/runtime/actor_system.hpp"
#include "tests/support/probe_actor.hpp"

namespace strata::pipeline {
namespace {

using test_support::received;
constexpr std::int32_t k_vocab = 4096;
constexpr int k_layers = 3;

using event_log = std::shared_ptr<std::vector<std::string>>;

/// Layer i embeds (the first layer: a row's hidden value is its token) and then maps h to
/// 4h + i, so the output's value tells in which order the layers ran: 64t + 6 for 0, 1, 2.
/// Saving appends the bytes {i, block}.
class recording_layer final : public layer_compute {
 public:
  recording_layer(int index, event_log log) : index_(index), log_(std::move(log)) {}
  void run(const batch_layout& layout, std::vector<float>& hidden) override {
    note("run step " + std::to_string(layout.step));
    if (hidden.empty()) hidden.assign(layout.tokens.begin(), layout.tokens.end());
    for (auto& h : hidden) h = 4 * h + static_cast<float>(index_);
  }
  void save_pages(std::vector<frozen_block>& saved) override {
    note("save");
    for (auto& b : saved) {
      b.bytes.push_back(static_cast<std::byte>(index_));
      b.bytes.push_back(static_cast<std::byte>(b.block));
    }
  }
  void copy_pages(const std::vector<block_copy>& copies) override {
    note("copy " + std::to_string(copies.at(0).from) + "->" + std::to_string(copies.at(0).to));
  }
  void load_pages(const std::vector<frozen_block>& blocks) override { note("load " + std::to_string(blocks.at(0).block)); }
  void clear_state(std::int32_t slot) override { note("clear slot " + std::to_string(slot)); }
  void load_state(std::int32_t slot, std::span<const std::byte> in) override {
    note("load slot " + std::to_string(slot) + " from " + std::to_string(in.empty() ? -1 : static_cast<int>(in[0])));
  }
  void save_state(std::int32_t slot, std::vector<std::byte>& out) override {
    out.push_back(static_cast<std::byte>(index_));
    out.push_back(static_cast<std::byte>(slot));
  }

 private:
  void note(const std::string& what) { log_->push_back("layer " + std::to_string(index_) + " " + what); }
  int index_;
  event_log log_;
};

/// Logits that peak at the row's hidden value (mod the vocabulary).
class peak_output final : public output_compute {
 public:
  std::int32_t n_vocab() const override { return k_vocab; }
  void logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) override {
    out.assign(rows.size() * k_vocab, 0.0f);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto peak = static_cast<std::size_t>(hidden.at(static_cast<std::size_t>(rows[i]))) % k_vocab;
      out[i * k_vocab + peak] = 1.0f;
    }
  }
};

/// Draws the argmax; its logprob field carries how many tokens this sampler has drawn, so a test
/// sees whether a sequence kept its sampler across steps.
class counting_sampler final : public token_sampler {
 public:
  sampled_token draw(float* logits, std::int32_t n) override {
    std::int32_t best = 0;
    for (std::int32_t v = 1; v < n; ++v)
      if (logits[v] > logits[best]) best = v;
    return {0, best, static_cast<float>(++drawn_), {}};
  }

 private:
  int drawn_ = 0;
};

using reply_inbox = std::variant<step_done>;

struct pipeline_probe {
  event_log events = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::vector<open_sampler>> opened = std::make_shared<std::vector<open_sampler>>();
  test_support::probe_log<reply_inbox> replies = test_support::make_probe_log<reply_inbox>();
  actors::actor_system system{{.threads = 0}};
  actors::address<reply_inbox> scheduler = system.spawn<test_support::probe_actor<reply_inbox>>("scheduler", actors::supervision::stop_system, replies);
  stage_address output;
  stage_address first;

  pipeline_probe() {
    auto opened_log = opened;
    output = system.spawn<output_actor>("output", actors::supervision::stop_system,
                                        std::shared_ptr<output_compute>(std::make_shared<peak_output>()),
                                        sampler_factory([opened_log](const open_sampler& o) {
                                          opened_log->push_back(o);
                                          return std::make_unique<counting_sampler>();
                                        }));
    stage_address next = output;
    for (int i = k_layers - 1; i >= 0; --i) {
      next = system.spawn<layer_actor>("layer-" + std::to_string(i), actors::supervision::stop_system,
                                       std::shared_ptr<layer_compute>(std::make_shared<recording_layer>(i, events)), next,
                                       static_cast<std::size_t>(i));
    }
    first = next;
  }

  /// A step of one sequence whose rows are `tokens`, sampled at its last row, answered to the probe.
  forward step(std::uint64_t step, std::uint64_t seq, std::vector<std::int32_t> tokens) const {
    forward f;
    f.layout.step = step;
    f.layout.seqs.push_back(batch_sequence{seq, {0}, 0, static_cast<std::int32_t>(tokens.size()), 0, true});
    f.layout.tokens = std::move(tokens);
    f.reply_to = scheduler;
    return f;
  }
  std::vector<const step_done*> done() const { return received<step_done>(replies); }
};

std::int32_t through_three_layers(std::int32_t token) { return 64 * token + 6; }

TEST(pipeline, a_step_passes_through_every_layer_in_order_one_stage_per_message) {
  pipeline_probe p;
  p.output.tell(open_sampler{1, {}, {}});
  p.system.run_all();
  p.first.tell(p.step(1, 1, {5, 6}));
  for (int i = 0; i < k_layers; ++i) {
    ASSERT_TRUE(p.system.run_one());
    ASSERT_EQ(p.events->size(), static_cast<std::size_t>(i + 1));
    EXPECT_EQ(p.events->back(), "layer " + std::to_string(i) + " run step 1");
  }
  ASSERT_TRUE(p.system.run_one());  // the output stage
  EXPECT_TRUE(p.done().empty());
  ASSERT_TRUE(p.system.run_one());  // its reply, delivered to the scheduler
  EXPECT_FALSE(p.system.run_one());
  ASSERT_EQ(p.done().size(), 1u);
  const step_done& d = *p.done()[0];
  EXPECT_EQ(d.step, 1u);
  ASSERT_EQ(d.samples.size(), 1u);
  EXPECT_EQ(d.samples[0].seq, 1u);
  EXPECT_EQ(d.samples[0].token, through_three_layers(6)) << "drawn from the last row, after layers 0, 1, 2";
}

TEST(pipeline, the_output_samples_the_rows_asked_for_each_with_its_own_sequences_sampler) {
  pipeline_probe p;
  p.output.tell(open_sampler{1, {}, {}});
  p.output.tell(open_sampler{2, {}, {}});
  forward f = p.step(4, 1, {});
  f.layout.seqs.clear();
  f.layout.tokens = {1, 2, 3, 10, 11, 20};
  f.layout.seqs = {batch_sequence{1, {0}, 0, 3, 0, true}, batch_sequence{2, {1}, 3, 2, 0, false},
                   batch_sequence{3, {2}, 5, 1, 7, true}};
  p.first.tell(std::move(f));
  p.system.run_all();
  ASSERT_EQ(p.done().size(), 1u);
  const auto& samples = p.done()[0]->samples;
  ASSERT_EQ(samples.size(), 2u) << "sequence 2 is a prompt chunk: nothing drawn";
  EXPECT_EQ(samples[0].seq, 1u);
  EXPECT_EQ(samples[0].token, through_three_layers(3));
  EXPECT_EQ(samples[1].seq, 3u);
  EXPECT_EQ(samples[1].token, -1) << "no sampler open for sequence 3: the scheduler ignores the row";
}

TEST(pipeline, a_sequence_keeps_its_sampler_across_steps_until_it_is_closed) {
  pipeline_probe p;
  open_sampler o{1, {}, {7, 8, 9}};
  o.settings.temperature = 0.5f;
  p.output.tell(std::move(o));
  // As the scheduler sends them: a step at a time, each after the previous one came back.
  auto run = [&](forward f) {
    p.first.tell(std::move(f));
    p.system.run_all();
  };
  run(p.step(1, 1, {9}));
  run(p.step(2, 1, {3}));
  p.output.tell(close_sampler{1});
  run(p.step(3, 1, {4}));
  p.output.tell(open_sampler{1, {}, {}});
  run(p.step(4, 1, {5}));
  ASSERT_EQ(p.opened->size(), 2u);
  EXPECT_EQ(p.opened->at(0).id, 1u);
  EXPECT_EQ(p.opened->at(0).settings.temperature, 0.5f);
  EXPECT_EQ(p.opened->at(0).history, (std::vector<std::int32_t>{7, 8, 9}));
  auto done = p.done();
  ASSERT_EQ(done.size(), 4u);
  for (std::size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i]->step, i + 1);
    ASSERT_EQ(done[i]->samples.size(), 1u);
  }
  // The sampler lives across steps (its count goes on), is gone once closed, and a new one starts
  // afresh.
  EXPECT_EQ(done[0]->samples[0].logprob, 1.0f);
  EXPECT_EQ(done[1]->samples[0].logprob, 2.0f);
  EXPECT_EQ(done[1]->samples[0].token, through_three_layers(3));
  EXPECT_EQ(done[2]->samples[0].token, -1);
  EXPECT_EQ(done[3]->samples[0].logprob, 1.0f);
  EXPECT_EQ(done[3]->samples[0].token, through_three_layers(5));
}

TEST(pipeline, a_sampler_closed_while_its_step_is_in_the_layers_gives_no_token_for_that_step) {
  pipeline_probe p;
  p.output.tell(open_sampler{1, {}, {}});
  p.system.run_all();
  // A cancel: the scheduler closes the sampler while the step is on its way through the layers,
  // and the close reaches the output stage first.
  p.first.tell(p.step(1, 1, {9}));
  p.output.tell(close_sampler{1});
  p.system.run_all();
  ASSERT_EQ(p.done().size(), 1u);
  ASSERT_EQ(p.done()[0]->samples.size(), 1u);
  EXPECT_EQ(p.done()[0]->samples[0].token, -1);
}

TEST(pipeline, frozen_blocks_are_saved_over_every_layer_before_the_loads_copies_and_compute) {
  pipeline_probe p;
  p.output.tell(open_sampler{1, {}, {}});
  forward f = p.step(1, 1, {2});
  f.layout.save = {3, 7};
  // Block 4 is restored by this step and copied from by it: the load must come first.
  f.layout.copy = {block_copy{4, 6}};
  f.layout.load = {frozen_block{4, std::vector<std::byte>(8)}};
  p.first.tell(std::move(f));
  p.system.run_all();
  std::vector<std::string> want;
  for (int i = 0; i < k_layers; ++i) {
    const std::string layer = "layer " + std::to_string(i) + " ";
    want.insert(want.end(), {layer + "save", layer + "load 4", layer + "copy 4->6", layer + "run step 1"});
  }
  EXPECT_EQ(*p.events, want);
  ASSERT_EQ(p.done().size(), 1u);
  const auto& saved = p.done()[0]->saved;
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].block, 3);
  EXPECT_EQ(saved[0].bytes, (std::vector<std::byte>{std::byte{0}, std::byte{3}, std::byte{1}, std::byte{3}, std::byte{2}, std::byte{3}}));
  EXPECT_EQ(saved[1].block, 7);
  EXPECT_EQ(saved[1].bytes, (std::vector<std::byte>{std::byte{0}, std::byte{7}, std::byte{1}, std::byte{7}, std::byte{2}, std::byte{7}}));
}

TEST(pipeline, a_step_that_only_saves_computes_nothing_and_still_answers) {
  pipeline_probe p;
  forward f = p.step(9, 1, {});
  f.layout.seqs.clear();
  f.layout.save = {2};
  p.first.tell(std::move(f));
  p.system.run_all();
  EXPECT_EQ(*p.events, (std::vector<std::string>{"layer 0 save", "layer 1 save", "layer 2 save"}));
  ASSERT_EQ(p.done().size(), 1u);
  EXPECT_EQ(p.done()[0]->step, 9u);
  EXPECT_TRUE(p.done()[0]->samples.empty());
  ASSERT_EQ(p.done()[0]->saved.size(), 1u);
  EXPECT_EQ(p.done()[0]->saved[0].bytes.size(), 2u * k_layers);
}

TEST(pipeline, each_layer_starts_a_sequence_from_a_cleared_or_restored_slot_and_copies_snapshots_out_after_computing) {
  pipeline_probe p;
  forward f = p.step(1, 1, {});
  f.layout.tokens = {1, 2, 3, 4, 5, 6};
  batch_sequence fresh{1, {0}, 0, 2, 0, false};
  fresh.state_slot = 2;
  fresh.snapshot = true;
  batch_sequence resumed{2, {1}, 2, 3, 32, false};
  resumed.state_slot = 1;
  resumed.restore = kv::state_snapshot{{{std::byte{10}}, {std::byte{11}}, {std::byte{12}}}};
  resumed.snapshot = true;
  batch_sequence going_on{3, {2}, 5, 1, 40, false};
  going_on.state_slot = 0;
  f.layout.seqs = {fresh, resumed, going_on};
  p.first.tell(std::move(f));
  p.system.run_all();
  std::vector<std::string> want;
  for (int i = 0; i < k_layers; ++i) {
    const std::string layer = "layer " + std::to_string(i) + " ";
    want.insert(want.end(), {layer + "clear slot 2", layer + "load slot 1 from " + std::to_string(10 + i), layer + "run step 1"});
  }
  EXPECT_EQ(*p.events, want) << "a sequence that goes on keeps its slot as it is";
  ASSERT_EQ(p.done().size(), 1u);
  const auto& states = p.done()[0]->states;
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].seq, 1u);
  EXPECT_EQ(states[0].end, 2);
  EXPECT_EQ(states[1].seq, 2u);
  EXPECT_EQ(states[1].end, 35);
  ASSERT_EQ(states[1].state.layers.size(), static_cast<std::size_t>(k_layers));
  for (int i = 0; i < k_layers; ++i)
    EXPECT_EQ(states[1].state.layers[static_cast<std::size_t>(i)], (std::vector<std::byte>{static_cast<std::byte>(i), std::byte{1}}));
}

}  // namespace
}  // namespace strata::pipeline
