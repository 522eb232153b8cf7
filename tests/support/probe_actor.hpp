#pragma once
// probe_actor<Inbox>: stands in for an actor in tests and keeps every message it receives, in
// order, for the test to assert on between steps of a manual actor_system.

#include <cstddef>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "actors/runtime/actor.hpp"

namespace strata::test_support {

/// What a probe received. Only the test's thread touches it: the system it lives in is manual.
template <class Inbox>
using probe_log = std::shared_ptr<std::vector<Inbox>>;

template <class Inbox>
probe_log<Inbox> make_probe_log() {
  return std::make_shared<std::vector<Inbox>>();
}

template <class Inbox>
class probe_actor final : public actors::actor<Inbox> {
 public:
  explicit probe_actor(probe_log<Inbox> log) : log_(std::move(log)) {}
  void receive(Inbox msg) override { log_->push_back(std::move(msg)); }

 private:
  probe_log<Inbox> log_;
};

/// The messages of type M in `log`, in the order they came.
template <class M, class Inbox>
std::vector<const M*> received(const probe_log<Inbox>& log) {
  std::vector<const M*> out;
  for (const auto& msg : *log) {
    if (const auto* m = std::get_if<M>(&msg)) out.push_back(m);
  }
  return out;
}

}  // namespace strata::test_support
