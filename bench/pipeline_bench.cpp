// The actor pipeline's own cost: a scheduler, 24 layer actors and an output stage whose compute
// does nothing, so every microsecond measured is messaging, planning and bookkeeping. Prints the
// overhead per decode step; compare it with a real model's step time (strata bench) to get the
// pipeline's share.

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "actors/pipeline/layer_actor.hpp"
#include "actors/pipeline/output_actor.hpp"
#include "actors/runtime/actor_system.hpp"
#include "actors/scheduler/scheduler_actor.hpp"

namespace {

using namespace strata;
constexpr int k_layers = 24;
constexpr int k_hidden = 896;

class no_layer final : public pipeline::layer_compute {
 public:
  void run(const pipeline::batch_layout& layout, std::vector<float>& hidden) override {
    if (hidden.empty()) hidden.assign(layout.tokens.size() * k_hidden, 0.5f);  // the activations travel for real
  }
};
class no_output final : public pipeline::output_compute {
 public:
  std::int32_t n_vocab() const override { return 16; }
  void logits(const std::vector<float>&, const std::vector<std::int32_t>& rows, std::vector<float>& out) override {
    out.assign(rows.size() * 16, 0.0f);
  }
};
class first_token final : public pipeline::token_sampler {
 public:
  pipeline::sampled_token draw(float*, std::int32_t) override { return {0, 3, 0.0f, {}}; }
};
class pass_text final : public sched::text_assembler {
 public:
  output feed(const std::string& p) override { return {p, false}; }
  std::string finish() override { return {}; }
};

class done_counter final : public actors::actor<sched::stream_inbox> {
 public:
  explicit done_counter(std::shared_ptr<std::promise<void>> all, int expected) : all_(std::move(all)), expected_(expected) {}
  void receive(sched::stream_inbox msg) override {
    if (std::holds_alternative<sched::request_done>(msg) && ++done_ == expected_) all_->set_value();
  }

 private:
  std::shared_ptr<std::promise<void>> all_;
  int expected_;
  int done_ = 0;
};

double run(int streams, int tokens) {
  metrics::registry registry;
  auto m = sched::scheduler_metrics::create(registry);
  actors::actor_system system({.threads = 2});
  const pipeline::stage_address output = system.spawn<pipeline::output_actor>(
      "output", actors::supervision::stop_system, std::shared_ptr<pipeline::output_compute>(std::make_shared<no_output>()),
      pipeline::sampler_factory([](const pipeline::open_sampler&) { return std::make_unique<first_token>(); }));
  pipeline::stage_address next = output;
  for (int i = k_layers - 1; i >= 0; --i) {
    next = system.spawn<pipeline::layer_actor>("layer", actors::supervision::stop_system,
                                               std::shared_ptr<pipeline::layer_compute>(std::make_shared<no_layer>()), next);
  }
  sched::text_services text{[](std::int32_t) { return std::string("x"); }, [](std::int32_t) { return false; },
                            [](const std::vector<std::string>&) { return std::make_unique<pass_text>(); }};
  const auto scheduler = system.spawn<sched::scheduler_actor>(
      "scheduler", actors::supervision::stop_system,
      sched::scheduler_config{{.token_budget = 512, .max_running = 64, .max_context = 8192}, 4096}, text, next, output, m);
  auto all = std::make_shared<std::promise<void>>();
  auto fut = all->get_future();
  auto sink = system.spawn<done_counter>("sink", actors::supervision::stop_system, all, streams);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < streams; ++i) {
    sched::generation_settings g;
    g.max_tokens = tokens;
    g.ignore_eos = true;
    scheduler.tell(sched::submit{static_cast<std::uint64_t>(i + 1), {1, 2, 3, 4}, g, sink});
  }
  fut.wait();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return secs / tokens;  // seconds per decode step (all streams advance together)
}

}  // namespace

int main() {
  for (int streams : {1, 16}) {
    double step = run(streams, 2000);
    std::printf("pipeline overhead, %d layers, %2d stream(s): %.1f us per decode step (%.2f us per token)\n", k_layers,
                streams, step * 1e6, step * 1e6 / streams);
  }
  return 0;
}
