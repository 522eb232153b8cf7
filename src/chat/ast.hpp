#pragma once
// The syntax tree of a parsed template: expressions and statements.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/chat/value.hpp"

namespace strata::chat {

enum class expr_kind : std::uint8_t {
  literal,      ///< `literal`
  name,         ///< variable `name`
  list,         ///< [args...]
  tuple,        ///< (args...)
  dict,         ///< {args[0]: args[1], ...}
  attr,         ///< args[0].name
  item,         ///< args[0][args[1]]
  slice,        ///< args[0][args[1]:args[2]:args[3]] (null parts are omitted)
  call,         ///< args[0](args[1...], kwargs)
  filter,       ///< args[0] | name(args[1...], kwargs); args[0] is null in filter blocks
  test,         ///< args[0] is [not] name(args[1...])
  unary,        ///< name args[0]: "-", "+", "not"
  binary,       ///< args[0] name args[1]: arithmetic, "~", "and", "or"
  compare,      ///< args[0] ops[0] args[1] ops[1] args[2] ...
  conditional,  ///< args[0] if args[1] else args[2] (args[2] may be null)
};

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  expr_kind kind;
  int line = 0;
  value literal;
  std::string name;
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;  ///< `is not`
};

enum class stmt_kind : std::uint8_t {
  text,        ///< literal text
  output,      ///< {{ expr }}
  if_,         ///< if expr: body else else_body (elif nests an if in else_body)
  for_,        ///< for target in expr [if cond]: body else else_body
  set,         ///< set target = expr
  set_block,   ///< set target | filters: body
  macro,       ///< macro name(params = defaults): body
  call_block,  ///< call(params) expr: body (body is the macro `caller`)
  filter_block,  ///< filter filters: body
  break_,
  continue_,
  block,       ///< a plain group of statements ({% generation %})
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;

struct stmt {
  stmt_kind kind;
  int line = 0;
  std::string text;
  expr_ptr expr;
  expr_ptr target;
  expr_ptr condition;
  std::vector<expr_ptr> filters;
  std::vector<stmt_ptr> body;
  std::vector<stmt_ptr> else_body;
  std::vector<std::string> params;
  std::vector<expr_ptr> defaults;  ///< one per param, null when it has none
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

}  // namespace strata::chat
