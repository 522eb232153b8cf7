#pragma once
// A chat template (the Jinja source from tokenizer.chat_template), parsed once and rendered per
// request with the messages. Renders like Hugging Face's apply_chat_template: jinja2 with
// trim_blocks, lstrip_blocks, loop controls, an immutable sandbox, raise_exception and
// strftime_now.

#include <memory>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "src/chat/evaluator.hpp"
#include "src/common/error.hpp"

namespace strata::chat {

/// A parsed template; copies share the syntax tree, and rendering is const and thread-safe.
class chat_template {
 public:
  /// Parses `source`; a syntax error is errc::template_error with "line N: ..." in the message.
  static result<chat_template> parse(std::string source);

  /// Renders with the variables of `context` (a JSON object). A template's raise_exception(msg)
  /// gives errc::template_error with exactly `msg`; other failures name the line.
  result<std::string> render(const boost::json::value& context) const;

  /// Renders a conversation the way apply_chat_template does: `messages`,
  /// `add_generation_prompt`, `bos_token`, `eos_token`, `tools` and `documents` (none unless
  /// `extra_context` gives them), plus every key of `extra_context`.
  result<std::string> render_chat(const boost::json::array& messages, bool add_generation_prompt,
                                  std::string_view bos_token, std::string_view eos_token,
                                  const boost::json::object& extra_context = {}) const;

  /// Bounds on output size, loop iterations, macro recursion and computed strings and lists.
  void set_limits(const render_limits& limits) { limits_ = limits; }
  const render_limits& limits() const noexcept { return limits_; }
  /// The clock strftime_now() reads (the system clock by default).
  void set_clock(template_clock clock) { clock_ = std::move(clock); }

 private:
  struct program;
  explicit chat_template(std::shared_ptr<const program> p) : program_(std::move(p)) {}

  std::shared_ptr<const program> program_;
  render_limits limits_;
  template_clock clock_;
};

}  // namespace strata::chat
