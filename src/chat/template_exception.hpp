#pragma once
// The exception that carries a template error inside the chat component. It never leaves the
// component: chat_template converts it into a strata::error at its public boundary.

#include <stdexcept>
#include <string>
#include <utility>

#include "src/common/error.hpp"

namespace strata::chat {

/// A template failed to parse or to render; `message` is what the user sees.
class template_exception : public std::runtime_error {
 public:
  explicit template_exception(std::string message, int line = 0, errc code = errc::template_error)
      : std::runtime_error(message), message_(std::move(message)), line_(line), code_(code) {}

  const std::string& message() const noexcept { return message_; }
  int line() const noexcept { return line_; }
  errc code() const noexcept { return code_; }
  /// True when the template itself raised the error (raise_exception): its message is kept as is.
  bool raised_by_template() const noexcept { return raised_by_template_; }
  template_exception& mark_raised_by_template() {
    raised_by_template_ = true;
    return *this;
  }

 private:
  std::string message_;
  int line_;
  errc code_;
  bool raised_by_template_ = false;
};

/// Throws a template_exception whose message is the concatenation of `parts`.
template <class... Parts>
[[noreturn]] void throw_template_error(Parts&&... parts) {
  std::string msg;
  (msg.append(std::forward<Parts>(parts)), ...);
  throw template_exception(std::move(msg));
}

}  // namespace strata::chat
