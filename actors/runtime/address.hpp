#pragma once
// address<Inbox>: a typed handle to an actor's mailbox; copyable, and it may travel in messages.

#include <memory>
#include <string>
#include <utility>

#include "actors/runtime/message.hpp"

namespace strata::actors {

template <class Inbox>
class actor_cell;

/// Where messages for an actor with inbox `Inbox` go. An address never keeps its actor alive:
/// telling a stopped or destroyed actor returns false and drops the message.
template <class Inbox>
class address {
 public:
  address() = default;
  explicit address(std::weak_ptr<actor_cell<Inbox>> cell) : cell_(std::move(cell)) {}

  /// Moves `msg` into the actor's mailbox. Returns false if the actor has stopped.
  template <class M>
    requires accepted_by<M, Inbox> && (!std::is_lvalue_reference_v<M>)
  bool tell(M&& msg) const;

  /// tell() for the message a handler passes on as its last act (the next stage of a pipeline):
  /// the receiver runs it on this thread once the handler returns, and no other thread is woken
  /// for it. From outside the system's threads it is tell().
  template <class M>
    requires accepted_by<M, Inbox> && (!std::is_lvalue_reference_v<M>)
  bool pass_on(M&& msg) const;

  /// True while the actor exists and accepts messages.
  bool alive() const;

  /// The actor's name, or "" for an empty address.
  std::string name() const;

  bool empty() const noexcept { return cell_.expired(); }

 private:
  template <class>
  friend class port;
  bool send(Inbox&& msg, bool continuation) const;

  std::weak_ptr<actor_cell<Inbox>> cell_;
};

}  // namespace strata::actors

// The member definitions need the complete actor_cell, which itself needs address: it comes last.
#include "actors/runtime/actor_cell.hpp"

namespace strata::actors {

template <class Inbox>
template <class M>
  requires accepted_by<M, Inbox> && (!std::is_lvalue_reference_v<M>)
bool address<Inbox>::tell(M&& msg) const {
  return send(Inbox{std::forward<M>(msg)}, false);
}

template <class Inbox>
template <class M>
  requires accepted_by<M, Inbox> && (!std::is_lvalue_reference_v<M>)
bool address<Inbox>::pass_on(M&& msg) const {
  return send(Inbox{std::forward<M>(msg)}, true);
}

template <class Inbox>
bool address<Inbox>::send(Inbox&& msg, bool continuation) const {
  // Checked here, not on the class: an inbox may hold messages that carry its own address.
  static_assert(inbox<Inbox>, "Inbox must be a std::variant of message types");
  if (auto cell = cell_.lock()) return cell->enqueue(std::move(msg), continuation);
  return false;
}

template <class Inbox>
bool address<Inbox>::alive() const {
  auto cell = cell_.lock();
  return cell && cell->accepting();
}

template <class Inbox>
std::string address<Inbox>::name() const {
  auto cell = cell_.lock();
  return cell ? cell->name() : std::string{};
}

}  // namespace strata::actors
