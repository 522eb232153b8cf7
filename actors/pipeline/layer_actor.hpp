#pragma once
// layer_actor: owns one transformer layer (its weights view and its KV pages, inside its
// layer_compute) and passes each batch on to the next stage.
// Who sends to it: the scheduler (layer 0) or the previous layer.

#include <memory>

#include "actors/pipeline/messages.hpp"
#include "actors/pipeline/stage_compute.hpp"
#include "actors/runtime/actor.hpp"

namespace strata::pipeline {

class layer_actor final : public actors::actor<stage_inbox> {
 public:
  /// `compute` is shared by restarts of this actor only; nobody else holds it.
  layer_actor(std::shared_ptr<layer_compute> compute, stage_address next)
      : compute_(std::move(compute)), next_(std::move(next)) {}

  void receive(stage_inbox msg) override { visit_handle(*this, std::move(msg)); }

  void handle(forward f) {
    if (!f.layout.save.empty()) {
      if (f.saved.empty()) {
        for (auto b : f.layout.save) f.saved.push_back(frozen_block{b, {}});
      }
      compute_->save_pages(f.saved);
    }
    // Loads before copies: a block restored by this very step may already be the source of a
    // copy (a sequence admitted in the same plan reuses part of it).
    if (!f.layout.load.empty()) compute_->load_pages(f.layout.load);
    if (!f.layout.copy.empty()) compute_->copy_pages(f.layout.copy);
    if (f.layout.n_rows() > 0) compute_->run(f.layout, f.hidden);
    next_.pass_on(std::move(f));  // the next layer runs on this thread, after this handler
  }
  // The samplers live in the output stage, and the scheduler sends these there directly.
  void handle(open_sampler) {}
  void handle(close_sampler) {}

 private:
  std::shared_ptr<layer_compute> compute_;
  stage_address next_;
};

}  // namespace strata::pipeline
