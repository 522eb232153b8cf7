#pragma once
// Runs a parsed template: statements write into an output string, expressions yield values.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/chat/ast.hpp"
#include "src/chat/value.hpp"

namespace strata::chat {

/// Bounds that keep a runaway template from hanging or exhausting memory or the stack.
struct render_limits {
  /// Most bytes a rendering may write (including macro and block-set buffers).
  std::size_t max_output_bytes = std::size_t{16} << 20;
  /// Most loop iterations (and items made by range()) over the whole rendering.
  std::uint64_t max_loop_iterations = 1'000'000;
  /// Deepest nesting of macro calls.
  int max_call_depth = 64;
  /// Most bytes of strings and of list slots that operators, filters, calls and slices may
  /// produce over the whole rendering: it bounds the work of templates that grow a value in a
  /// loop, which copies it every time.
  std::uint64_t max_computed_bytes = std::uint64_t{256} << 20;
};

/// The clock that strftime_now() reads.
using template_clock = std::function<std::chrono::system_clock::time_point()>;

/// One rendering of a template. Methods throw template_exception; chat_template catches it.
class evaluator {
 public:
  evaluator(render_limits limits, template_clock clock);

  /// Renders `body` with the variables of `context` (plus the built-in globals).
  std::string render(const std::vector<stmt_ptr>& body, const value_dict& context);

  /// Calls a callable value.
  value call(const value& fn, call_args& args);
  /// Applies the filter `name` (filters.cpp).
  value apply_filter(const std::string& name, const value& operand, call_args& args);
  /// Applies the test `name` (predicates.cpp).
  bool apply_test(const std::string& name, const value& operand, call_args& args);
  /// Counts `n` loop iterations (or generated items) against the limit.
  void count_iterations(std::uint64_t n);
  /// Counts the size of a computed string or list against max_computed_bytes; returns `v`.
  value charge(value v);
  const render_limits& limits() const noexcept { return limits_; }

 private:
  struct frame {
    std::unordered_map<std::string, value> vars;
    std::shared_ptr<frame> parent;
  };
  using frame_ptr = std::shared_ptr<frame>;
  enum class flow { normal, break_loop, continue_loop };

  // Statements (evaluator.cpp).
  flow exec(const std::vector<stmt_ptr>& body, const frame_ptr& f, std::string& out);
  flow exec(const stmt& s, const frame_ptr& f, std::string& out);
  flow exec_for(const stmt& s, const frame_ptr& f, std::string& out);
  void exec_set(const stmt& s, const frame_ptr& f);
  value make_macro(const stmt& s, const frame_ptr& f, std::string name);
  void assign(const expr& target, const value& v, const frame_ptr& f);
  void append(std::string& out, const std::string& text);
  value apply_filter_chain(const std::vector<expr_ptr>& filters, value v, const frame_ptr& f);

  // Expressions (evaluator_expressions.cpp).
  value eval(const expr& e, const frame_ptr& f);
  value lookup(const std::string& name, const frame_ptr& f) const;
  call_args eval_args(const expr& e, std::size_t first, const frame_ptr& f);
  value eval_slice(const expr& e, const frame_ptr& f);

  void install_globals(frame& root);
  void release_cycles();

  render_limits limits_;
  template_clock clock_;
  std::uint64_t iterations_ = 0;
  std::uint64_t computed_bytes_ = 0;
  std::size_t bytes_written_ = 0;
  int call_depth_ = 0;
  std::vector<std::shared_ptr<frame>> retained_frames_;
  std::vector<value> namespaces_;
};

/// Python's iteration over a value: list items, dict keys, string code points, nothing for
/// undefined. Throws for values that are not iterable.
value_list iterate(const value& v);

/// `obj.name` with jinja2's rules (dict methods, then keys; string methods; namespaces).
value get_attribute(const value& obj, const std::string& name);
/// `obj[key]` with jinja2's rules (falls back to attributes for string keys).
value get_item(const value& obj, const value& key);

}  // namespace strata::chat
