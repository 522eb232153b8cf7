#pragma once
// actor<Inbox>: the base class of every actor. Owns private state; its handlers run one at a time.

#include <string>
#include <utility>
#include <variant>

#include <boost/asio/any_io_executor.hpp>

#include "actors/runtime/address.hpp"

namespace strata::actors {

/// Derive from actor<Inbox> and implement receive(); the usual body is
/// `visit_handle(*this, std::move(msg))`, which calls the overloaded `handle(M)` for the
/// alternative held. Handlers must be short: heavy work goes to the compute pool.
template <class Inbox>
class actor {
 public:
  using inbox_type = Inbox;

  actor() = default;
  actor(const actor&) = delete;
  actor& operator=(const actor&) = delete;
  virtual ~actor() = default;

  /// Handles one message. An exception escaping here goes to the supervisor.
  virtual void receive(Inbox msg) = 0;

  /// Called once, on the actor's strand, after its mailbox has drained on stop.
  virtual void on_stop() {}

 protected:
  /// This actor's own address, to hand to others for replies.
  const address<Inbox>& self() const { return self_; }
  const std::string& name() const { return name_; }
  /// The actor's strand: async operations started with it complete serialized with handlers.
  const boost::asio::any_io_executor& executor() const { return executor_; }

  template <class Self>
  static void visit_handle(Self& self, Inbox&& msg) {
    std::visit([&self](auto&& m) { self.handle(std::move(m)); }, std::move(msg));
  }

 private:
  template <class>
  friend class actor_cell;
  address<Inbox> self_;
  std::string name_;
  boost::asio::any_io_executor executor_;
};

}  // namespace strata::actors
