#pragma once
// Builds the syntax tree of a template from its tokens (jinja2's grammar and precedence).

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "src/chat/ast.hpp"
#include "src/chat/lexer.hpp"

namespace strata::chat {

/// The parser; `parse` throws template_exception (with the line) on a syntax error.
class parser {
 public:
  explicit parser(std::vector<token> tokens) : tokens_(std::move(tokens)) {}

  /// The statements of the whole template.
  std::vector<stmt_ptr> parse();

  /// How deeply expressions and blocks may nest before the template is rejected.
  static constexpr int max_depth = 200;

 private:
  // Statements (parser.cpp).
  std::vector<stmt_ptr> parse_body(std::initializer_list<std::string_view> end_tags);
  stmt_ptr parse_statement();
  stmt_ptr parse_if();
  stmt_ptr parse_for();
  stmt_ptr parse_set();
  stmt_ptr parse_macro();
  stmt_ptr parse_call_block();
  stmt_ptr parse_filter_block();
  void parse_params(stmt& s);
  void parse_filter_chain(std::vector<expr_ptr>& out);
  expr_ptr parse_assign_target(bool allow_attr);
  void end_tag(std::string_view name);

  // Expressions (parser_expressions.cpp).
  expr_ptr parse_tuple(bool with_condexpr, bool explicit_parens = false);
  expr_ptr parse_expression(bool with_condexpr = true);
  expr_ptr parse_condexpr();
  expr_ptr parse_or();
  expr_ptr parse_and();
  expr_ptr parse_not();
  expr_ptr parse_compare();
  expr_ptr parse_math1();
  expr_ptr parse_concat();
  expr_ptr parse_math2();
  expr_ptr parse_pow();
  expr_ptr parse_unary(bool with_filter = true);
  expr_ptr parse_unary_operand() { return parse_unary(); }
  /// A left-associative chain `a op b op c ...` of one precedence level: any of `ops` between
  /// operands that `operand` parses.
  expr_ptr parse_binary_chain(std::initializer_list<std::string_view> ops, expr_ptr (parser::*operand)());
  expr_ptr parse_primary();
  expr_ptr parse_postfix(expr_ptr node);
  /// A call of `callee`: its argument list, from the "(" at the cursor.
  expr_ptr parse_call(expr_ptr callee);
  expr_ptr parse_filter_expr(expr_ptr node);
  expr_ptr parse_subscript(expr_ptr node);
  expr_ptr parse_filter(expr_ptr node);
  expr_ptr parse_test(expr_ptr node);
  void parse_call_args(expr& call);
  expr_ptr make(expr_kind kind, int line, std::string name = {});

  // Token stream.
  const token& cur() const { return tokens_[pos_]; }
  const token& peek(std::size_t ahead = 1) const;
  const token& next();
  bool is_op(std::string_view op) const { return cur().kind == token_kind::op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == token_kind::name && cur().text == n; }
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view n);
  void expect_op(std::string_view op);
  std::string expect_name();
  void expect(token_kind kind, std::string_view what);
  [[noreturn]] void fail(const std::string& message) const;
  std::string describe(const token& t) const;

  /// Counts nesting so that hostile input cannot overflow the stack.
  struct depth_guard {
    explicit depth_guard(parser& p);
    ~depth_guard() { --p_.depth_; }
    parser& p_;
  };

  std::vector<token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<stmt*> open_macros_;
};

}  // namespace strata::chat
