#include "actors/runtime/port.hpp"

#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "actors/runtime/actor_system.hpp"

namespace strata::actors {
namespace {

struct word {
  std::string text;
};
struct number {
  int value = 0;
};
using mixed_inbox = std::variant<word, number>;

/// Records what it receives, in order.
class recorder final : public actor<mixed_inbox> {
 public:
  explicit recorder(std::vector<std::string>* seen) : seen_(seen) {}
  void receive(mixed_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(word w) { seen_->push_back("word:" + w.text); }
  void handle(number n) { seen_->push_back("number:" + std::to_string(n.value)); }

 private:
  std::vector<std::string>* seen_;
};

/// A request that carries the port its answer goes to: the asker's inbox is not named.
struct question {
  int value = 0;
  port<number> reply_to;
};
using answerer_inbox = std::variant<question>;

class doubler final : public actor<answerer_inbox> {
 public:
  void receive(answerer_inbox msg) override { visit_handle(*this, std::move(msg)); }
  void handle(question q) { q.reply_to.tell(number{2 * q.value}); }
};

TEST(port, delivers_one_message_type_into_the_same_mailbox_in_order_with_the_address) {
  std::vector<std::string> seen;
  actor_system sys({.threads = 0});
  auto a = sys.spawn<recorder>("recorder", supervision::stop_system, &seen);
  port<word> words = a;
  port<number> numbers = a;
  EXPECT_TRUE(words.tell(word{"one"}));
  EXPECT_TRUE(a.tell(number{2}));
  EXPECT_TRUE(numbers.tell(number{3}));
  EXPECT_TRUE(words.tell(word{"four"}));
  sys.run_all();
  EXPECT_EQ(seen, (std::vector<std::string>{"word:one", "number:2", "number:3", "word:four"}));
}

TEST(port, a_reply_port_travels_in_the_request_and_the_answer_comes_back) {
  std::vector<std::string> seen;
  actor_system sys({.threads = 0});
  auto asker = sys.spawn<recorder>("asker", supervision::stop_system, &seen);
  auto answerer = sys.spawn<doubler>("doubler", supervision::stop_system);
  answerer.tell(question{21, asker});
  sys.run_all();
  EXPECT_EQ(seen, (std::vector<std::string>{"number:42"}));
}

TEST(port, an_empty_port_or_one_whose_actor_is_gone_refuses) {
  port<word> none;
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(none.tell(word{"x"}));
  std::vector<std::string> seen;
  port<word> late;
  {
    actor_system sys({.threads = 0});
    auto a = sys.spawn<recorder>("recorder", supervision::stop_system, &seen);
    late = a;
    EXPECT_FALSE(late.empty());
    sys.stop();
  }
  EXPECT_FALSE(late.tell(word{"after"}));
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace strata::actors
