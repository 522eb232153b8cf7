// The scheduler's messages, one exchange at a time: probes stand in for the first pipeline stage,
// the output stage (which gets the samplers' open and close) and the request's stream; the test
// answers each step through the port it carries, as the output stage does; the manual executor
// delivers each message when the test steps it.

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/runtime/actor_system.hpp"
#include "actors/scheduler/scheduler_actor.hpp"
#include "tests/support/probe_actor.hpp"

namespace strata::sched {
namespace {

using test_support::probe_actor;
using test_support::received;

/// Passes every piece on at once and never stops.
class echo_text final : public text_assembler {
 public:
  output feed(const std::string& piece) override { return {piece, false}; }
  std::string finish() override { return {}; }
};

struct scheduler_probe {
  metrics::registry registry;
  scheduler_metrics m = scheduler_metrics::create(registry);
  test_support::probe_log<pipeline::stage_inbox> stage = test_support::make_probe_log<pipeline::stage_inbox>();
  test_support::probe_log<pipeline::stage_inbox> output = test_support::make_probe_log<pipeline::stage_inbox>();
  test_support::probe_log<stream_inbox> stream = test_support::make_probe_log<stream_inbox>();
  actors::actor_system system{{.threads = 0}};
  stream_address sink = system.spawn<probe_actor<stream_inbox>>("stream", actors::supervision::stop_system, stream);
  scheduler_address scheduler;

  explicit scheduler_probe(planner_options opts = {}) {
    auto first = system.spawn<probe_actor<pipeline::stage_inbox>>("first-stage", actors::supervision::stop_system, stage);
    auto out = system.spawn<probe_actor<pipeline::stage_inbox>>("output", actors::supervision::stop_system, output);
    text_services text{[](std::int32_t t) { return std::string(1, static_cast<char>('a' + t % 26)); },
                       [](std::int32_t t) { return t == 0; }, [](const std::vector<std::string>&) { return std::make_unique<echo_text>(); }};
    scheduler = system.spawn<scheduler_actor>("scheduler", actors::supervision::stop_system, scheduler_config{opts, 64}, text, first, out, m);
  }

  void submit(std::uint64_t id, std::vector<std::int32_t> prompt, int max_tokens) {
    generation_settings g;
    g.max_tokens = max_tokens;
    g.ignore_eos = true;
    scheduler.tell(sched::submit{id, std::move(prompt), g, sink});
  }
  /// Answers the step `n` (1-based) as the output stage does, to the port it carries: one token
  /// per (sequence, token).
  void answer(std::size_t n, std::vector<std::pair<std::uint64_t, std::int32_t>> drawn) {
    const pipeline::forward& f = *steps().at(n - 1);
    step_done d;
    d.step = f.layout.step;
    for (auto [seq, token] : drawn) d.samples.push_back(pipeline::sampled_token{seq, token, 0.0f, {}});
    ASSERT_TRUE(f.reply_to.tell(std::move(d)));
  }
  std::vector<const pipeline::forward*> steps() const { return received<pipeline::forward>(stage); }
};

TEST(scheduler_protocol, opens_a_sampler_sends_one_step_and_streams_each_drawn_token_until_max_tokens) {
  scheduler_probe p;
  p.submit(1, {10, 11, 12}, 2);
  ASSERT_TRUE(p.system.run_one());  // the scheduler takes the submit...
  EXPECT_TRUE(p.stage->empty());    // ... and what it sent is queued, not yet delivered
  EXPECT_EQ(p.system.run_all(), 3u);  // to the stream, the output stage and the first stage
  ASSERT_EQ(p.stream->size(), 1u);
  ASSERT_TRUE(std::holds_alternative<request_admitted>(p.stream->at(0))) << "admitted before any other event";
  ASSERT_EQ(p.output->size(), 1u);
  const auto* open = std::get_if<pipeline::open_sampler>(&p.output->at(0));
  ASSERT_TRUE(open) << "the sampler is opened at the output stage";
  EXPECT_EQ(open->id, 1u);
  EXPECT_EQ(open->history, (std::vector<std::int32_t>{10, 11, 12}));
  ASSERT_EQ(p.stage->size(), 1u);
  const auto* first = std::get_if<pipeline::forward>(&p.stage->at(0));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->layout.step, 1u);
  EXPECT_EQ(first->layout.tokens, (std::vector<std::int32_t>{10, 11, 12}));
  ASSERT_EQ(first->layout.seqs.size(), 1u);
  EXPECT_EQ(first->layout.seqs[0].id, 1u);
  EXPECT_EQ(first->layout.seqs[0].n_rows, 3);
  EXPECT_EQ(first->layout.seqs[0].start_pos, 0);
  EXPECT_TRUE(first->layout.seqs[0].sample);
  EXPECT_TRUE(first->hidden.empty()) << "the first layer embeds: no activations go to it";

  p.answer(1, {{1, 7}});
  p.system.run_all();
  auto tokens = received<token_event>(p.stream);
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0]->token, 7);
  EXPECT_EQ(tokens[0]->text, "h");
  ASSERT_EQ(p.steps().size(), 2u);
  const auto* second = p.steps()[1];
  EXPECT_EQ(second->layout.step, 2u);
  EXPECT_EQ(second->layout.tokens, (std::vector<std::int32_t>{7}));
  EXPECT_EQ(second->layout.seqs[0].start_pos, 3);
  EXPECT_TRUE(received<request_done>(p.stream).empty());

  p.answer(2, {{1, 8}});
  p.system.run_all();
  ASSERT_EQ(received<token_event>(p.stream).size(), 2u);
  auto done = received<request_done>(p.stream);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->reason, finish_reason::length);
  EXPECT_EQ(done[0]->prompt_tokens, 3);
  EXPECT_EQ(done[0]->completion_tokens, 2);
  auto closed = received<pipeline::close_sampler>(p.output);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0]->id, 1u);
  EXPECT_EQ(p.steps().size(), 2u) << "no step after the last request ended";
  EXPECT_EQ(p.m.kv_blocks_used->value(), 0.0);
}

TEST(scheduler_protocol, two_requests_share_one_step_and_each_gets_its_own_token) {
  scheduler_probe p;
  p.submit(1, {10, 11, 12}, 4);
  p.submit(2, {20, 21}, 4);
  p.system.run_all();
  // The first step went out before the second submit was read: request 2 joins the next one.
  ASSERT_EQ(p.steps().size(), 1u);
  p.answer(1, {{1, 7}});
  p.system.run_all();
  ASSERT_EQ(p.steps().size(), 2u);
  const auto& layout = p.steps()[1]->layout;
  ASSERT_EQ(layout.seqs.size(), 2u);
  EXPECT_EQ(layout.seqs[0].id, 1u);
  EXPECT_EQ(layout.seqs[0].first_row, 0);
  EXPECT_EQ(layout.seqs[0].n_rows, 1);
  EXPECT_EQ(layout.seqs[1].id, 2u);
  EXPECT_EQ(layout.seqs[1].first_row, 1);
  EXPECT_EQ(layout.seqs[1].n_rows, 2);
  EXPECT_EQ(layout.tokens, (std::vector<std::int32_t>{7, 20, 21}));

  p.answer(2, {{1, 8}, {2, 9}});
  p.system.run_all();
  auto tokens = received<token_event>(p.stream);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[1]->request, 1u);
  EXPECT_EQ(tokens[1]->token, 8);
  EXPECT_EQ(tokens[2]->request, 2u);
  EXPECT_EQ(tokens[2]->token, 9);
}

TEST(scheduler_protocol, a_request_cancelled_while_its_step_is_in_flight_ends_at_once_and_its_token_is_dropped) {
  scheduler_probe p;
  p.submit(1, {10, 11, 12}, 5);
  p.system.run_all();
  ASSERT_EQ(p.steps().size(), 1u);
  p.scheduler.tell(cancel{1});
  p.system.run_all();
  auto done = received<request_done>(p.stream);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->reason, finish_reason::cancelled);
  EXPECT_EQ(done[0]->completion_tokens, 0);
  EXPECT_EQ(received<pipeline::close_sampler>(p.output).size(), 1u);

  p.answer(1, {{1, 7}});  // the step that was in flight comes back
  p.system.run_all();
  EXPECT_TRUE(received<token_event>(p.stream).empty());
  EXPECT_EQ(p.steps().size(), 1u);
  EXPECT_EQ(p.m.kv_blocks_used->value(), 0.0);
}

TEST(scheduler_protocol, a_paused_request_gets_no_step_until_it_resumes) {
  scheduler_probe p;
  p.submit(1, {10, 11, 12}, 5);
  p.system.run_all();
  p.scheduler.tell(set_paused{1, true});
  p.answer(1, {{1, 7}});
  p.system.run_all();
  EXPECT_EQ(received<token_event>(p.stream).size(), 1u) << "the token drawn before the pause is still sent";
  EXPECT_EQ(p.steps().size(), 1u);
  p.scheduler.tell(set_paused{1, false});
  p.system.run_all();
  ASSERT_EQ(p.steps().size(), 2u);
  EXPECT_EQ(p.steps()[1]->layout.tokens, (std::vector<std::int32_t>{7}));
}

TEST(scheduler_protocol, a_duplicate_id_or_an_overlong_request_is_rejected_with_400_and_nothing_is_sent_for_it) {
  scheduler_probe p({.max_context = 16});
  p.submit(1, {10, 11, 12}, 4);
  p.submit(1, {10, 11, 12}, 4);
  p.submit(2, std::vector<std::int32_t>(10, 13), 10);
  p.system.run_all();
  auto rejected = received<request_rejected>(p.stream);
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0]->request, 1u);
  EXPECT_EQ(rejected[0]->status, 400);
  EXPECT_EQ(rejected[0]->code, "duplicate_request");
  EXPECT_EQ(rejected[1]->request, 2u);
  EXPECT_EQ(rejected[1]->status, 400);
  EXPECT_EQ(rejected[1]->code, "context_length_exceeded");
  EXPECT_EQ(received<pipeline::open_sampler>(p.output).size(), 1u);
  EXPECT_EQ(received<request_admitted>(p.stream).size(), 1u) << "a refused request is never admitted";
  EXPECT_EQ(p.steps().size(), 1u);
}

}  // namespace
}  // namespace strata::sched
