#pragma once
// layer_actor: owns one transformer layer (its weights view and its KV pages, inside its
// layer_compute) and passes each batch on to the next stage.
// Who sends to it: the scheduler (layer 0) or the previous layer.

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include <spdlog/spdlog.h>

#include "actors/pipeline/messages.hpp"
#include "actors/pipeline/stage_compute.hpp"
#include "actors/runtime/actor.hpp"

namespace strata::pipeline {

class layer_actor final : public actors::actor<stage_inbox> {
 public:
  /// `compute` is shared by restarts of this actor only; nobody else holds it. `index` is the
  /// layer's place in the pipeline (its part of a kv::state_snapshot).
  layer_actor(std::shared_ptr<layer_compute> compute, stage_address next, std::size_t index = 0)
      : compute_(std::move(compute)), next_(std::move(next)), index_(index) {}

  void receive(stage_inbox msg) override { visit_handle(*this, std::move(msg)); }

  void handle(forward f) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!f.layout.save.empty()) {
      if (f.saved.empty()) {
        for (auto b : f.layout.save) f.saved.push_back(frozen_block{b, {}});
      }
      compute_->save_pages(f.saved);
    }
    const auto t1 = std::chrono::steady_clock::now();
    // Loads before copies: a block restored by this very step may already be the source of a
    // copy (a sequence admitted in the same plan reuses part of it).
    if (!f.layout.load.empty()) compute_->load_pages(f.layout.load);
    if (index_ == 0 && (!f.layout.save.empty() || !f.layout.load.empty())) {
      using ms = std::chrono::duration<double, std::milli>;
      spdlog::debug("step {}, layer 0: {} blocks saved in {:.1f} ms, {} loaded in {:.1f} ms", f.layout.step, f.layout.save.size(),
                    ms(t1 - t0).count(), f.layout.load.size(), ms(std::chrono::steady_clock::now() - t1).count());
    }
    if (!f.layout.copy.empty()) compute_->copy_pages(f.layout.copy);
    // Each sequence starts from its state at start_pos: a restored snapshot, or nothing at 0.
    for (auto& s : f.layout.seqs) {
      if (s.state_slot < 0) continue;
      if (s.restore) {
        const auto& layers = s.restore->layers;
        compute_->load_state(s.state_slot, index_ < layers.size() ? std::span<const std::byte>(layers[index_])
                                                                  : std::span<const std::byte>());
      } else if (s.start_pos == 0) {
        compute_->clear_state(s.state_slot);
      }
    }
    if (f.layout.n_rows() > 0) compute_->run(f.layout, f.hidden);
    take_snapshots(f);
    next_.pass_on(std::move(f));  // the next layer runs on this thread, after this handler
  }
  // The samplers live in the output stage, and the scheduler sends these there directly.
  void handle(open_sampler) {}
  void handle(close_sampler) {}

 private:
  /// Copies this layer's state of each sequence that asked for a snapshot into f.states (the
  /// first layer opens the entries, in layout order).
  void take_snapshots(forward& f) {
    std::size_t k = 0;
    for (const auto& s : f.layout.seqs) {
      if (!s.snapshot) continue;
      if (k == f.states.size()) f.states.push_back(frozen_state{s.id, s.start_pos + s.n_rows, {}});
      auto& layers = f.states[k++].state.layers;
      if (layers.size() <= index_) layers.resize(index_ + 1);
      if (s.state_slot >= 0) compute_->save_state(s.state_slot, layers[index_]);
    }
  }

  std::shared_ptr<layer_compute> compute_;
  stage_address next_;
  std::size_t index_;
};

}  // namespace strata::pipeline
