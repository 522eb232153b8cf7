#pragma once
// output_actor: the last pipeline stage. Owns the final norm and LM head (in its output_compute)
// and one sampler per open sequence; answers each step with its drawn tokens, to the port the step
// carries. Who sends to it: the last layer actor (steps), the scheduler (open and close a sampler).

#include <memory>
#include <unordered_map>

#include "actors/pipeline/messages.hpp"
#include "actors/pipeline/stage_compute.hpp"
#include "actors/runtime/actor.hpp"

namespace strata::pipeline {

class output_actor final : public actors::actor<stage_inbox> {
 public:
  output_actor(std::shared_ptr<output_compute> compute, sampler_factory make_sampler)
      : compute_(std::move(compute)), make_sampler_(std::move(make_sampler)) {}

  void receive(stage_inbox msg) override { visit_handle(*this, std::move(msg)); }

  void handle(open_sampler m) { samplers_[m.id] = make_sampler_(m); }
  void handle(close_sampler m) { samplers_.erase(m.id); }
  void handle(forward f);

 private:
  std::shared_ptr<output_compute> compute_;
  sampler_factory make_sampler_;
  std::unordered_map<std::uint64_t, std::unique_ptr<token_sampler>> samplers_;
  std::vector<std::int32_t> rows_;  // reused across steps
  std::vector<float> logits_;
};

}  // namespace strata::pipeline
