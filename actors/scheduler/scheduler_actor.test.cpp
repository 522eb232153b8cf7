// The scheduler and the compute pipeline as actors on the manual executor, with a small stand-in
// model whose output depends on every earlier position of its own sequence through the KV pages:
// a batch that mixed up block tables, positions or rows would change the tokens. The test steps
// the system on its own thread; nothing sleeps or polls.

#include "actors/scheduler/scheduler_actor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "actors/host_tier/host_tier.hpp"
#include "actors/pipeline/layer_actor.hpp"
#include "actors/pipeline/output_actor.hpp"
#include "actors/runtime/actor_system.hpp"
#include "io/ssd/wire_record.hpp"
#include "src/kv/prefix_hash.hpp"
#include "tests/support/test_seed.hpp"

namespace strata::sched {
namespace {

constexpr int k_block = 4;
constexpr int k_blocks = 256;
constexpr int k_vocab = 97;

/// A layer whose "attention" sums every earlier position's value from the KV pages.
class toy_layer final : public pipeline::layer_compute {
 public:
  explicit toy_layer(int index) : index_(index), pages_(static_cast<std::size_t>(k_blocks * k_block), 0.0) {}
  void run(const pipeline::batch_layout& layout, std::vector<float>& hidden) override {
    if (hidden.empty()) {
      hidden.resize(layout.tokens.size());
      for (std::size_t r = 0; r < layout.tokens.size(); ++r) hidden[r] = static_cast<float>(layout.tokens[r]);
    }
    for (const auto& s : layout.seqs) {
      for (int i = 0; i < s.n_rows; ++i) {
        int pos = s.start_pos + i;
        float& h = hidden[static_cast<std::size_t>(s.first_row + i)];
        slot(s, pos) = std::fmod(h * 1.7 + index_ + pos, 1000.0);
        double acc = 0;
        for (int p = 0; p <= pos; ++p) acc += slot(s, p) * (p + 1);
        h = static_cast<float>(std::fmod(acc, 100000.0));
      }
    }
  }
  void copy_pages(const std::vector<pipeline::block_copy>& copies) override {
    for (const auto& c : copies) {
      std::copy_n(pages_.begin() + c.from * k_block, k_block, pages_.begin() + c.to * k_block);
    }
  }
  /// A frozen block: every layer's page, layer 0 first (pipeline::frozen_block's layout).
  void save_pages(std::vector<pipeline::frozen_block>& saved) override {
    for (auto& f : saved) {
      const auto* p = reinterpret_cast<const std::byte*>(&pages_.at(static_cast<std::size_t>(f.block * k_block)));
      f.bytes.insert(f.bytes.end(), p, p + k_page_bytes);
    }
  }
  void load_pages(const std::vector<pipeline::frozen_block>& blocks) override {
    for (const auto& f : blocks)
      std::memcpy(&pages_.at(static_cast<std::size_t>(f.block * k_block)), f.bytes.data() + index_ * k_page_bytes, k_page_bytes);
  }
  static constexpr std::size_t k_page_bytes = k_block * sizeof(double);

 private:
  double& slot(const pipeline::batch_sequence& s, int pos) {
    auto block = s.blocks.at(static_cast<std::size_t>(pos / k_block));
    return pages_.at(static_cast<std::size_t>(block * k_block + pos % k_block));
  }
  int index_;
  std::vector<double> pages_;
};

class toy_output final : public pipeline::output_compute {
 public:
  std::int32_t n_vocab() const override { return k_vocab; }
  void logits(const std::vector<float>& hidden, const std::vector<std::int32_t>& rows, std::vector<float>& out) override {
    out.assign(rows.size() * k_vocab, 0.0f);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      int best = static_cast<int>(std::fmod(std::fabs(hidden[static_cast<std::size_t>(rows[i])]), k_vocab));
      for (int v = 0; v < k_vocab; ++v) out[i * k_vocab + v] = -std::abs(v - best);
    }
  }
};

class greedy final : public pipeline::token_sampler {
 public:
  pipeline::sampled_token draw(float* logits, std::int32_t n) override {
    int best = 0;
    for (int v = 1; v < n; ++v)
      if (logits[v] > logits[best]) best = v;
    return {0, best, 0.0f, {}};
  }
};

/// Emits each piece at once; stops on "S".
class plain_text final : public text_assembler {
 public:
  explicit plain_text(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  output feed(const std::string& piece) override {
    for (auto& s : stop_)
      if (piece == s) return {"", true};
    return {piece, false};
  }
  std::string finish() override { return {}; }

 private:
  std::vector<std::string> stop_;
};

struct outcome {
  std::vector<std::int32_t> tokens;
  std::string text;
  std::optional<request_done> done;
  std::optional<request_rejected> rejected;
  bool admitted = false;
  bool event_before_admission = false;  // a token or done that came before request_admitted
};
using outcomes = std::map<std::uint64_t, outcome>;

/// Collects every request's events. The system is stepped on the test's thread, so the test reads
/// the map between steps without a lock.
class collector final : public actors::actor<stream_inbox> {
 public:
  explicit collector(std::shared_ptr<outcomes> out) : out_(std::move(out)) {}
  void receive(stream_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(request_admitted a) { (*out_)[a.request].admitted = true; }
  void handle(token_event e) {
    auto& o = (*out_)[e.request];
    o.event_before_admission = o.event_before_admission || !o.admitted;
    if (e.token >= 0) o.tokens.push_back(e.token);
    o.text += e.text;
  }
  void handle(request_done d) {
    auto& o = (*out_)[d.request];
    o.event_before_admission = o.event_before_admission || !o.admitted;
    o.done = d;
  }
  void handle(open_stream) {}
  void handle(request_rejected r) { (*out_)[r.request].rejected = r; }

 private:
  std::shared_ptr<outcomes> out_;
};

/// Whether steps pass, and the ones held while they may not.
struct gate_state {
  bool closed = false;
  std::vector<pipeline::forward> held;
};

/// Sits in front of the first layer. While closed it holds every step, so requests submitted
/// meanwhile all reach the scheduler before any step runs; sampler messages always pass.
class gate_stage final : public actors::actor<pipeline::stage_inbox> {
 public:
  gate_stage(std::shared_ptr<gate_state> state, pipeline::stage_address next) : state_(std::move(state)), next_(std::move(next)) {}
  void receive(pipeline::stage_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(pipeline::forward f) {
    if (state_->closed) {
      state_->held.push_back(std::move(f));
    } else {
      next_.pass_on(std::move(f));
    }
  }
  void handle(pipeline::open_sampler m) { next_.tell(std::move(m)); }
  void handle(pipeline::close_sampler m) { next_.tell(std::move(m)); }

 private:
  std::shared_ptr<gate_state> state_;
  pipeline::stage_address next_;
};

text_services toy_text() {
  return {[](std::int32_t t) { return t == 5 ? std::string("S") : std::string(1, static_cast<char>('a' + t % 26)); },
          [](std::int32_t t) { return t == 0; },
          [](const std::vector<std::string>& stop) { return std::make_unique<plain_text>(stop); }};
}

/// The scheduler, a gate, three toy layers and the output stage on a manual executor: nothing
/// runs until the test steps the system, on its own thread.
struct pipeline_fixture {
  // Declared before the system so that they outlive every actor that updates them.
  metrics::registry registry;
  scheduler_metrics m = scheduler_metrics::create(registry);
  std::shared_ptr<outcomes> results = std::make_shared<outcomes>();
  std::shared_ptr<gate_state> gate = std::make_shared<gate_state>();
  actors::actor_system system{{.threads = 0}};
  scheduler_address scheduler;
  pipeline::stage_address first_layer;
  actors::address<stream_inbox> sink;

  /// host_budget > 0: a host tier of that many bytes under a pool that keeps no cached block.
  explicit pipeline_fixture(planner_options opts, std::int64_t host_budget = 0) {
    opts.block_tokens = k_block;
    // Built back to front: each stage needs its successor's address; steps carry the scheduler's.
    auto out = system.spawn<pipeline::output_actor>(
        "output", actors::supervision::stop_system, std::shared_ptr<pipeline::output_compute>(std::make_shared<toy_output>()),
        pipeline::sampler_factory([](const pipeline::open_sampler&) { return std::make_unique<greedy>(); }));
    pipeline::stage_address next = out;
    for (int i = 2; i >= 0; --i) {
      next = system.spawn<pipeline::layer_actor>("layer" + std::to_string(i), actors::supervision::stop_system,
                                                 std::shared_ptr<pipeline::layer_compute>(std::make_shared<toy_layer>(i)), next);
    }
    first_layer = next;
    auto gated = system.spawn<gate_stage>("gate", actors::supervision::stop_system, gate, first_layer);
    scheduler_config cfg{opts, k_blocks};
    if (host_budget > 0) {
      kv::pool_config pc;
      pc.space.capacity = {k_blocks, 0, 0};
      pc.block_bytes = {3 * static_cast<std::int64_t>(toy_layer::k_page_bytes), 1, 1};
      pc.budget = k_blocks * pc.block_bytes[0];
      pc.cached_budget = 0;
      cfg.pool = pc;
      cfg.planner.prefix_cache = true;
      cfg.planner.host = true;
      cfg.host = system.spawn<host_tier::host_tier>("host-tier", actors::supervision::stop_system, host_budget,
                                                    std::optional<ssd::store_address>{}, 3, k_block, host_tier::tier_metrics{});
    }
    scheduler = system.spawn<scheduler_actor>("scheduler", actors::supervision::stop_system, cfg, toy_text(), gated, out, m);
    if (cfg.host) cfg.host->tell(host_tier::attach{scheduler});
    sink = system.spawn<collector>("collector", actors::supervision::stop_system, results);
  }

  void submit(std::uint64_t id, std::vector<std::int32_t> prompt, int max_tokens, std::vector<std::string> stop = {},
              bool ignore_eos = true) {
    generation_settings g;
    g.max_tokens = max_tokens;
    g.stop = std::move(stop);
    g.ignore_eos = ignore_eos;
    scheduler.tell(sched::submit{id, std::move(prompt), g, sink});
  }

  /// Lets the held steps and every later one through.
  void open_gate() {
    gate->closed = false;
    for (auto& f : std::exchange(gate->held, {})) first_layer.tell(std::move(f));
  }

  bool is_done(std::uint64_t id) const {
    auto it = results->find(id);
    return it != results->end() && (it->second.done || it->second.rejected);
  }
  outcome get(std::uint64_t id) const { return results->contains(id) ? results->at(id) : outcome{}; }
};

std::vector<std::int32_t> random_prompt(std::mt19937& rng, int n) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (auto& t : p) t = 6 + static_cast<std::int32_t>(rng() % (k_vocab - 6));
  return p;
}

TEST(scheduler_actor, a_request_gives_the_same_tokens_alone_and_batched_with_fifteen_others) {
  std::mt19937 rng(test_seed());
  auto prompt = random_prompt(rng, 37);
  std::vector<std::int32_t> alone;
  {
    pipeline_fixture f({.token_budget = 16, .max_running = 16});
    f.submit(1, prompt, 24);
    f.system.run_all();
    ASSERT_TRUE(f.is_done(1));
    alone = f.get(1).tokens;
    ASSERT_EQ(alone.size(), 24u);
  }
  pipeline_fixture f({.token_budget = 16, .max_running = 16});
  for (std::uint64_t i = 2; i <= 16; ++i) {
    f.submit(i, random_prompt(rng, 5 + static_cast<int>(rng() % 60)), 10 + static_cast<int>(rng() % 30));
  }
  f.submit(1, prompt, 24);
  f.system.run_all();
  for (std::uint64_t i = 1; i <= 16; ++i) ASSERT_TRUE(f.is_done(i)) << "request " << i;
  EXPECT_EQ(f.get(1).tokens, alone);
  EXPECT_EQ(f.get(1).done->reason, finish_reason::length);
  EXPECT_EQ(f.get(1).done->completion_tokens, 24);
  EXPECT_EQ(f.get(1).done->prompt_tokens, 37);
  // Every request was admitted before any of its events.
  for (std::uint64_t i = 1; i <= 16; ++i) {
    EXPECT_TRUE(f.get(i).admitted) << i;
    EXPECT_FALSE(f.get(i).event_before_admission) << i;
  }
}

TEST(scheduler_actor, cancelled_requests_leave_the_batch_and_return_their_blocks) {
  pipeline_fixture f({.token_budget = 32, .max_running = 8});
  std::mt19937 rng(7);
  for (std::uint64_t i = 1; i <= 6; ++i) f.submit(i, random_prompt(rng, 20), 3000);
  f.system.run_until([&] { return f.m.kv_blocks_used->value() >= 30; });
  ASSERT_GE(f.m.kv_blocks_used->value(), 30.0);
  for (std::uint64_t i = 1; i <= 6; ++i) EXPECT_FALSE(f.is_done(i));
  for (std::uint64_t i = 1; i <= 6; ++i) f.scheduler.tell(cancel{i});
  f.system.run_all();
  for (std::uint64_t i = 1; i <= 6; ++i) {
    ASSERT_TRUE(f.is_done(i));
    EXPECT_EQ(f.get(i).done->reason, finish_reason::cancelled);
  }
  EXPECT_EQ(f.m.kv_blocks_used->value(), 0.0);
  EXPECT_EQ(f.m.running->value(), 0.0);
}

TEST(scheduler_actor, a_cancelled_waiting_request_leaves_the_queue_at_once_and_the_others_finish) {
  pipeline_fixture f({.token_budget = 32, .max_running = 1});
  // The gate holds the first step: request 1 runs (its blocks taken), 2 and 3 wait behind it.
  f.gate->closed = true;
  f.submit(1, {10, 11, 12, 13, 14, 15}, 6);
  f.submit(2, {20, 21, 22, 23, 24, 25, 26, 27, 28}, 6);
  f.submit(3, {30, 31, 32}, 6);
  f.system.run_all();
  ASSERT_EQ(f.gate->held.size(), 1u);
  ASSERT_EQ(f.m.waiting->value(), 2.0);
  ASSERT_EQ(f.m.running->value(), 1.0);
  const double blocks_of_first = f.m.kv_blocks_used->value();
  EXPECT_GT(blocks_of_first, 0.0);

  // Answered while the step is still held: the queue does not wait for the batch.
  f.scheduler.tell(cancel{2});
  f.system.run_all();
  ASSERT_TRUE(f.is_done(2));
  auto second = f.get(2);
  EXPECT_EQ(second.done->reason, finish_reason::cancelled);
  EXPECT_EQ(second.done->completion_tokens, 0);
  EXPECT_TRUE(second.tokens.empty());
  EXPECT_EQ(f.m.waiting->value(), 1.0);
  EXPECT_EQ(f.m.kv_blocks_used->value(), blocks_of_first);
  EXPECT_FALSE(f.is_done(1));
  EXPECT_EQ(f.gate->held.size(), 1u);

  f.open_gate();
  f.system.run_all();
  ASSERT_TRUE(f.is_done(1));
  ASSERT_TRUE(f.is_done(3));
  EXPECT_EQ(f.get(1).done->reason, finish_reason::length);
  EXPECT_EQ(f.get(3).done->reason, finish_reason::length);
  EXPECT_EQ(f.get(3).done->completion_tokens, 6);
  EXPECT_EQ(f.m.kv_blocks_used->value(), 0.0);
  EXPECT_EQ(f.m.waiting->value(), 0.0);
}

TEST(scheduler_actor, a_prompt_whose_blocks_left_the_pool_comes_back_from_the_host_tier_with_the_same_tokens) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  // 22 tokens and one generated token computed: 5 full blocks of 4 and a tail of 3.
  const auto prompt = random_prompt(rng, 22);
  std::vector<std::int32_t> cold;
  {
    pipeline_fixture f({.token_budget = 16, .max_running = 4});
    f.submit(1, prompt, 2);
    f.system.run_all();
    ASSERT_TRUE(f.is_done(1));
    cold = f.get(1).tokens;
  }
  pipeline_fixture f({.token_budget = 16, .max_running = 4}, 1 << 20);
  f.submit(1, prompt, 2);
  f.system.run_all();
  ASSERT_TRUE(f.is_done(1));
  EXPECT_EQ(f.get(1).tokens, cold);
  EXPECT_EQ(f.get(1).done->cached_tokens, 0);
  // Others come and go through the pool, which keeps nothing: every block leaves it as it is let go.
  for (std::uint64_t i = 2; i <= 5; ++i) f.submit(i, random_prompt(rng, 10 + static_cast<int>(rng() % 30)), 3);
  f.system.run_all();
  EXPECT_EQ(f.m.kv_blocks_cached->value(), 0.0);
  f.submit(10, prompt, 2);
  f.system.run_all();
  ASSERT_TRUE(f.is_done(10));
  const outcome again = f.get(10);
  EXPECT_EQ(again.tokens, cold) << "the restored pages hold what computing them wrote";
  const request_done& d = *again.done;
  // The 5 blocks before the last token, and the one token it shares with the tail.
  EXPECT_EQ(d.cached_tokens, 21);
  EXPECT_EQ(d.host_cached_tokens, 21);
  EXPECT_EQ(d.ssd_cached_tokens, 0);
  EXPECT_EQ(f.m.host_hit_tokens->value(), 21u);
  EXPECT_EQ(f.m.kv_blocks_used->value(), 0.0);
}

TEST(scheduler_actor, quiesce_answers_once_the_step_saving_the_last_blocks_has_run) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  const auto prompt = random_prompt(rng, 22);
  pipeline_fixture f({.token_budget = 16, .max_running = 4}, 1 << 20);
  // Every step waits at the gate until let through, one at a time.
  f.gate->closed = true;
  auto let_through = [&f] {
    for (auto& step : std::exchange(f.gate->held, {})) f.first_layer.tell(std::move(step));
  };
  int called = 0;
  f.submit(1, prompt, 2);
  for (int steps = 0; steps < 100; ++steps) {
    f.system.run_all();
    if (f.is_done(1)) break;
    let_through();
  }
  ASSERT_TRUE(f.is_done(1));
  // The reply is out; the step that saves the request's blocks (the pool keeps none) has not run.
  ASSERT_EQ(f.gate->held.size(), 1u);
  EXPECT_FALSE(f.gate->held.front().layout.save.empty());
  f.scheduler.tell(quiesce{[&] { ++called; }});
  f.system.run_all();
  EXPECT_EQ(called, 0) << "a step is in flight";
  let_through();
  f.system.run_all();
  EXPECT_EQ(called, 1);
  // The saves reached the host tier: the prompt comes back from it.
  f.open_gate();
  f.submit(2, prompt, 2);
  f.system.run_all();
  ASSERT_TRUE(f.is_done(2));
  EXPECT_EQ(f.get(2).done->host_cached_tokens, 21);
  // Idle: answered at once.
  f.scheduler.tell(quiesce{[&] { ++called; }});
  f.system.run_all();
  EXPECT_EQ(called, 2);
}

/// What toy_layer's pages hold for positions [0, n) of `tokens` computed in one sequence, block
/// `b`'s frozen copy (every layer's page, layer 0 first), worked out apart from the pipeline.
std::vector<std::byte> toy_frozen_block(const std::vector<std::int32_t>& tokens, int b) {
  const int n = (b + 1) * k_block;
  std::vector<float> hidden(tokens.begin(), tokens.begin() + n);
  std::vector<std::byte> out;
  for (int layer = 0; layer < 3; ++layer) {
    std::vector<double> slots(static_cast<std::size_t>(n));
    for (int pos = 0; pos < n; ++pos) {
      auto& h = hidden[static_cast<std::size_t>(pos)];
      slots[static_cast<std::size_t>(pos)] = std::fmod(h * 1.7 + layer + pos, 1000.0);
      double acc = 0;
      for (int p = 0; p <= pos; ++p) acc += slots[static_cast<std::size_t>(p)] * (p + 1);
      h = static_cast<float>(std::fmod(acc, 100000.0));
    }
    const auto* first = reinterpret_cast<const std::byte*>(slots.data() + b * k_block);
    out.insert(out.end(), first, first + toy_layer::k_page_bytes);
  }
  return out;
}

TEST(scheduler_actor, a_block_only_the_host_tier_holds_is_exported_by_value_without_a_step_and_stays_there) {
  const auto seed = test_seed();
  std::mt19937 rng(seed);
  const auto prompt = random_prompt(rng, 22);  // 5 full blocks of 4, and a tail
  planner_options o{.token_budget = 16, .max_running = 4};
  o.cache_ns.model = {rng(), rng()};
  pipeline_fixture f(o, 1 << 20);
  f.submit(1, prompt, 2);
  f.system.run_all();
  ASSERT_TRUE(f.is_done(1));
  // The pool keeps nothing: its blocks left it; another request's steps carry them to the host tier.
  f.submit(2, random_prompt(rng, 9), 3);
  f.system.run_all();
  ASSERT_TRUE(f.is_done(2));
  EXPECT_EQ(f.m.kv_blocks_cached->value(), 0.0);

  kv::cache_namespace ns = o.cache_ns;
  ns.block_tokens = k_block;
  kv::prefix_hasher hasher;
  const auto hashes = kv::chain_hashes(hasher, ns, {}, prompt);
  ASSERT_EQ(hashes.size(), 5u);
  // The gate holds every step: an answer that needed one would not come.
  f.gate->closed = true;
  std::map<int, std::optional<std::vector<std::byte>>> got;
  for (int b : {0, 3, 4}) {
    f.scheduler.tell(export_block{hashes[static_cast<std::size_t>(b)], false,
                                  [&got, b](std::optional<std::vector<std::byte>> r) { got[b] = std::move(r); }});
  }
  f.scheduler.tell(export_block{kv::block_hash{{1, 2, 3, 4}}, false,
                                [&got](std::optional<std::vector<std::byte>> r) { got[-1] = std::move(r); }});
  f.system.run_all();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_FALSE(got[-1]) << "held nowhere";
  for (int b : {0, 3, 4}) {
    ASSERT_TRUE(got[b]) << "block " << b;
    ssd::wire_fault fault{};
    const auto rec = ssd::decode_wire_record(*got[b], {o.cache_ns.model, kv::kv_format::f16, ssd::record_kind::block,
                                                       hashes[static_cast<std::size_t>(b)], 0}, fault);
    ASSERT_EQ(fault, ssd::wire_fault::none) << "block " << b << ": " << ssd::to_string(fault);
    EXPECT_EQ(rec.payload, toy_frozen_block(prompt, b)) << "block " << b << ": what computing it wrote";
    EXPECT_EQ(rec.meta.tokens, k_block);
    EXPECT_EQ(rec.meta.layers, 3);
  }
  EXPECT_TRUE(f.gate->held.empty()) << "no step was needed";

  // Still in the host tier: the prompt comes back from it.
  f.open_gate();
  f.submit(10, prompt, 2);
  f.system.run_all();
  ASSERT_TRUE(f.is_done(10));
  EXPECT_EQ(f.get(10).done->host_cached_tokens, 21);
  EXPECT_EQ(f.get(10).tokens, f.get(1).tokens);
}

TEST(scheduler_actor, a_full_queue_rejects_with_429) {
  pipeline_fixture f({.token_budget = 8, .max_running = 1, .max_queued = 1});
  f.submit(1, {10, 11, 12}, 4);
  f.submit(2, {10, 11, 12}, 4);
  f.submit(3, {10, 11, 12}, 4);
  f.system.run_all();
  auto third = f.get(3);
  ASSERT_TRUE(third.rejected);
  EXPECT_EQ(third.rejected->status, 429);
  // A refused request is never admitted, so the API can still answer it with a 429 status line.
  EXPECT_FALSE(third.admitted);
  EXPECT_TRUE(f.get(1).done);
  EXPECT_TRUE(f.get(2).done);
}

TEST(scheduler_actor, ends_on_a_stop_sequence_or_an_end_token_with_reason_stop) {
  pipeline_fixture f({.token_budget = 64, .max_running = 8});
  std::mt19937 rng(test_seed());
  // Whichever of the tokens 5 ("S", a stop string) or 0 (end of generation) comes first ends it.
  for (std::uint64_t i = 1; i <= 20; ++i) f.submit(i, random_prompt(rng, 9), 200, {"S"}, false);
  f.system.run_all();
  for (std::uint64_t i = 1; i <= 20; ++i) {
    auto o = f.get(i);
    ASSERT_TRUE(o.done);
    if (o.done->reason == finish_reason::stop) {
      // The end token is counted but never streamed; the stop string's token is streamed without
      // its text.
      bool by_stop_string = !o.tokens.empty() && o.tokens.back() == 5;
      auto streamed = static_cast<int>(o.tokens.size());
      EXPECT_EQ(o.done->completion_tokens, by_stop_string ? streamed : streamed + 1);
      EXPECT_EQ(std::count(o.tokens.begin(), o.tokens.end(), 0), 0) << "the end token was streamed";
      EXPECT_EQ(o.text.find('S'), std::string::npos) << "a stop sequence was emitted";
    } else {
      EXPECT_EQ(o.done->reason, finish_reason::length);
      EXPECT_EQ(o.done->completion_tokens, 200);
    }
  }
}

TEST(scheduler_actor, survives_kv_exhaustion_by_preempting_and_finishes_everything) {
  // 256 blocks of 4 = 1024 positions; 12 sequences of 60 + 40 need 1200.
  pipeline_fixture f({.token_budget = 64, .max_running = 12, .max_context = 512});
  std::mt19937 rng(3);
  // All twelve reach the scheduler before the first step runs: none can run ahead, and finish,
  // before the last ones arrive.
  f.gate->closed = true;
  for (std::uint64_t i = 1; i <= 12; ++i) f.submit(i, random_prompt(rng, 60), 40);
  f.system.run_all();
  EXPECT_EQ(f.m.running->value() + f.m.waiting->value(), 12.0);
  f.open_gate();
  f.system.run_all();
  for (std::uint64_t id = 1; id <= 12; ++id) {
    auto o = f.get(id);
    ASSERT_TRUE(o.done) << "request " << id;
    EXPECT_EQ(o.done->completion_tokens, 40);
  }
  EXPECT_GT(f.m.preemptions->value(), 0u);
}

/// Conversations of several turns, all running at once: turn t + 1's prompt is turn t's prompt,
/// its reply and a new user message, submitted as soon as turn t is done. Returns each turn's
/// outcome by (conversation, turn).
std::map<std::pair<int, int>, outcome> converse(bool prefix_cache, const std::vector<std::vector<std::vector<std::int32_t>>>& user,
                                                int reply_tokens) {
  planner_options o{.token_budget = 24, .max_running = 16};
  o.prefix_cache = prefix_cache;
  pipeline_fixture f(o);
  const int n_conv = static_cast<int>(user.size());
  const int n_turns = static_cast<int>(user[0].size());
  std::vector<std::vector<std::int32_t>> prompt(static_cast<std::size_t>(n_conv));
  std::vector<int> turn(static_cast<std::size_t>(n_conv), 0);
  auto id_of = [](int c, int t) { return static_cast<std::uint64_t>(c * 100 + t + 1); };
  for (int c = 0; c < n_conv; ++c) {
    prompt[static_cast<std::size_t>(c)] = user[static_cast<std::size_t>(c)][0];
    f.submit(id_of(c, 0), prompt[static_cast<std::size_t>(c)], reply_tokens);
  }
  std::map<std::pair<int, int>, outcome> out;
  // One message at a time; after each, the turns that just ended submit their next ones.
  do {
    for (int c = 0; c < n_conv; ++c) {
      auto& t = turn[static_cast<std::size_t>(c)];
      if (t >= n_turns || !f.is_done(id_of(c, t))) continue;
      outcome got = f.get(id_of(c, t));
      out[{c, t}] = got;
      if (++t >= n_turns) continue;
      auto& p = prompt[static_cast<std::size_t>(c)];
      p.insert(p.end(), got.tokens.begin(), got.tokens.end());
      const auto& u = user[static_cast<std::size_t>(c)][static_cast<std::size_t>(t)];
      p.insert(p.end(), u.begin(), u.end());
      f.submit(id_of(c, t), p, reply_tokens);
    }
  } while (f.system.run_one());
  return out;
}

TEST(scheduler_actor, multi_turn_conversations_give_the_same_tokens_with_and_without_the_prefix_cache) {
  std::mt19937 rng(test_seed());
  constexpr int n_conv = 8, n_turns = 3, reply = 8;
  std::vector<std::vector<std::vector<std::int32_t>>> user(n_conv);
  for (auto& conv : user) {
    conv.push_back(random_prompt(rng, 6 + static_cast<int>(rng() % 25)));
    for (int t = 1; t < n_turns; ++t) conv.push_back(random_prompt(rng, 1 + static_cast<int>(rng() % 15)));
  }
  // Each first message starts with its own token: a first turn shares no token with another
  // conversation's (the cache would reuse even one).
  for (int c = 0; c < n_conv; ++c) user[static_cast<std::size_t>(c)][0][0] = 6 + c;
  auto cold = converse(false, user, reply);
  auto warm = converse(true, user, reply);
  ASSERT_EQ(cold.size(), static_cast<std::size_t>(n_conv * n_turns));
  ASSERT_EQ(warm.size(), cold.size());
  int prompt_len_before = 0;
  for (int c = 0; c < n_conv; ++c) {
    for (int t = 0; t < n_turns; ++t) {
      const auto& a = cold.at({c, t});
      const auto& b = warm.at({c, t});
      EXPECT_EQ(b.tokens, a.tokens) << "conversation " << c << " turn " << t;
      EXPECT_EQ(a.done->cached_tokens, 0);
      if (t == 0) {
        EXPECT_EQ(b.done->cached_tokens, 0);
      } else {
        // The previous turn's prompt and reply were computed, except its last sampled token: all of
        // that is reused, the full blocks and the tokens of the last one.
        const int computed_before = prompt_len_before + reply - 1;
        EXPECT_EQ(b.done->cached_tokens, computed_before) << "conversation " << c << " turn " << t;
      }
      prompt_len_before = a.done->prompt_tokens;
    }
  }
}

TEST(scheduler_actor, preemption_with_the_prefix_cache_still_finishes_everything_with_the_same_tokens) {
  std::mt19937 rng(test_seed());
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 12; ++i) prompts.push_back(random_prompt(rng, 60));
  std::map<std::uint64_t, std::vector<std::int32_t>> reference;
  {
    pipeline_fixture f({.token_budget = 64, .max_running = 4, .max_context = 512});
    for (std::uint64_t i = 1; i <= 12; ++i) f.submit(i, prompts[i - 1], 40);
    f.system.run_all();
    for (std::uint64_t id = 1; id <= 12; ++id) {
      ASSERT_TRUE(f.is_done(id)) << "request " << id;
      reference[id] = f.get(id).tokens;
    }
  }
  // 256 blocks of 4 = 1024 positions for 12 sequences of 100: preemptions, and cached blocks
  // evicted to make room. The gate keeps the first requests from running ahead (and finishing)
  // before the last ones arrive, which would leave room for all.
  planner_options o{.token_budget = 64, .max_running = 12, .max_context = 512};
  o.prefix_cache = true;
  pipeline_fixture f(o);
  f.gate->closed = true;
  for (std::uint64_t i = 1; i <= 12; ++i) f.submit(i, prompts[i - 1], 40);
  f.system.run_all();
  ASSERT_EQ(f.gate->held.size(), 1u);
  EXPECT_EQ(f.m.running->value() + f.m.waiting->value(), 12.0);
  f.open_gate();
  f.system.run_all();
  for (std::uint64_t id = 1; id <= 12; ++id) {
    ASSERT_TRUE(f.is_done(id)) << "request " << id;
    EXPECT_EQ(f.get(id).tokens, reference[id]) << "request " << id;
  }
  EXPECT_GT(f.m.preemptions->value(), 0u);
}

}  // namespace
}  // namespace strata::sched
