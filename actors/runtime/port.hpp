#pragma once
// port<M>: an address that accepts one message type, whatever else its actor's inbox holds. A
// reply address travels in the message that asks for the reply (a step carries the port its
// result goes to), so an actor needs no address of the one that will read its answer, and no
// actor has to be built before another only to be told where to reply.

#include <memory>
#include <utility>

#include "actors/runtime/message.hpp"

namespace strata::actors {

template <class Inbox>
class address;

/// The side of a mailbox that takes messages of type M. actor_cell<Inbox> is one for every M of
/// its Inbox.
template <class M>
class port_sink {
 public:
  virtual bool accept(M&& msg, bool continuation) = 0;

 protected:
  ~port_sink() = default;
};

template <class M>
class port {
 public:
  port() = default;
  /// The port of an actor for one of the messages of its inbox.
  template <class Inbox>
    requires accepted_by<M, Inbox>
  port(const address<Inbox>& a) : sink_(a.cell_) {}  // NOLINT: an address is a port of each of its messages

  /// As address::tell: moves msg into the mailbox; false if the actor has stopped.
  bool tell(M msg) const {
    if (auto s = sink_.lock()) return s->accept(std::move(msg), false);
    return false;
  }
  /// As address::pass_on: the last act of a handler, run on this thread after it returns.
  bool pass_on(M msg) const {
    if (auto s = sink_.lock()) return s->accept(std::move(msg), true);
    return false;
  }
  bool empty() const noexcept { return sink_.expired(); }

 private:
  std::weak_ptr<port_sink<M>> sink_;
};

namespace detail {

/// One port_sink<M> of actor_cell `Cell`, forwarding to its enqueue().
template <class Cell, class Inbox, class M>
class cell_port : public port_sink<M> {
 public:
  bool accept(M&& msg, bool continuation) override {
    return static_cast<Cell*>(this)->enqueue(Inbox{std::move(msg)}, continuation);
  }
};

template <class Cell, class Inbox>
struct cell_ports;
template <class Cell, class... Ms>
struct cell_ports<Cell, std::variant<Ms...>> : cell_port<Cell, std::variant<Ms...>, Ms>... {};

}  // namespace detail

}  // namespace strata::actors
