// Expression parsing, lowest precedence first: conditional, or, and, not, comparisons, + -, ~,
// * / // %, **, unary - +, then primaries with their postfixes, filters and tests.

#include <cerrno>
#include <cstdlib>

#include "src/chat/filters.hpp"
#include "src/chat/parser.hpp"
#include "src/chat/predicates.hpp"
#include "src/chat/template_exception.hpp"

namespace strata::chat {
namespace {

bool is_compare_op(const token& t) {
  if (t.kind != token_kind::op) return false;
  return t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=";
}

}  // namespace

expr_ptr parser::make(expr_kind kind, int line, std::string name) {
  auto e = std::make_unique<expr>();
  e->kind = kind;
  e->line = line;
  e->name = std::move(name);
  return e;
}

expr_ptr parser::parse_tuple(bool with_condexpr, bool explicit_parens) {
  int line = cur().line;
  std::vector<expr_ptr> items;
  bool saw_comma = false;
  while (true) {
    if (!items.empty()) {
      if (!skip_op(",")) break;
      saw_comma = true;
    }
    const token& t = cur();
    bool at_end = t.kind == token_kind::var_end || t.kind == token_kind::block_end || t.kind == token_kind::eof ||
                  (t.kind == token_kind::op && (t.text == ")" || t.text == "=")) ||
                  (t.kind == token_kind::name && (t.text == "in" || t.text == "if"));
    if (at_end) {
      if (items.empty() && !explicit_parens) fail("Expected an expression, got " + describe(t));
      break;
    }
    items.push_back(parse_expression(with_condexpr));
  }
  if (items.size() == 1 && !saw_comma) return std::move(items[0]);
  auto tuple = make(expr_kind::tuple, line);
  tuple->args = std::move(items);
  return tuple;
}

expr_ptr parser::parse_expression(bool with_condexpr) {
  depth_guard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

expr_ptr parser::parse_condexpr() {
  auto node = parse_or();
  while (is_name("if")) {
    int line = next().line;
    auto cond = make(expr_kind::conditional, line);
    cond->args.push_back(std::move(node));
    cond->args.push_back(parse_or());
    cond->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
    node = std::move(cond);
  }
  return node;
}

expr_ptr parser::parse_or() { return parse_binary_chain({"or"}, &parser::parse_and); }

expr_ptr parser::parse_and() { return parse_binary_chain({"and"}, &parser::parse_not); }

expr_ptr parser::parse_not() {
  if (is_name("not")) {
    depth_guard guard(*this);
    auto u = make(expr_kind::unary, next().line, "not");
    u->args.push_back(parse_not());
    return u;
  }
  return parse_compare();
}

expr_ptr parser::parse_compare() {
  int line = cur().line;
  auto first = parse_math1();
  expr_ptr cmp;
  while (true) {
    std::string op;
    if (is_compare_op(cur())) {
      op = next().text;
    } else if (is_name("in")) {
      next();
      op = "in";
    } else if (is_name("not") && peek().kind == token_kind::name && peek().text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(expr_kind::compare, line);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

expr_ptr parser::parse_binary_chain(std::initializer_list<std::string_view> ops, expr_ptr (parser::*operand)()) {
  auto left = (this->*operand)();
  for (;;) {
    bool at_op = false;
    for (auto op : ops) at_op = at_op || is_op(op) || is_name(op);  // "or" and "and" are names
    if (!at_op) return left;
    const token& op = next();
    auto b = make(expr_kind::binary, op.line, op.text);
    b->args.push_back(std::move(left));
    b->args.push_back((this->*operand)());
    left = std::move(b);
  }
}

expr_ptr parser::parse_math1() { return parse_binary_chain({"+", "-"}, &parser::parse_concat); }

expr_ptr parser::parse_concat() { return parse_binary_chain({"~"}, &parser::parse_math2); }

expr_ptr parser::parse_math2() { return parse_binary_chain({"*", "/", "//", "%"}, &parser::parse_pow); }

expr_ptr parser::parse_pow() { return parse_binary_chain({"**"}, &parser::parse_unary_operand); }

expr_ptr parser::parse_unary(bool with_filter) {
  depth_guard guard(*this);
  expr_ptr node;
  if (is_op("-") || is_op("+")) {
    node = make(expr_kind::unary, cur().line, next().text);
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

expr_ptr parser::parse_primary() {
  const token& t = cur();
  int line = t.line;
  switch (t.kind) {
    case token_kind::name: {
      std::string n = next().text;
      auto lit = make(expr_kind::literal, line);
      if (n == "true" || n == "True") lit->literal = value(true);
      else if (n == "false" || n == "False") lit->literal = value(false);
      else if (n == "none" || n == "None") lit->literal = value::none();
      else {
        for (stmt* m : open_macros_) {
          m->uses_varargs |= n == "varargs";
          m->uses_kwargs |= n == "kwargs";
          m->uses_caller |= n == "caller";
        }
        return make(expr_kind::name, line, std::move(n));
      }
      return lit;
    }
    case token_kind::string: {
      std::string s = next().text;
      while (cur().kind == token_kind::string) s += next().text;
      auto lit = make(expr_kind::literal, line);
      lit->literal = value(std::move(s));
      return lit;
    }
    case token_kind::integer: {
      auto lit = make(expr_kind::literal, line);
      const std::string& digits = next().text;
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(digits.c_str(), &end, 10);
      if (errno == ERANGE) fail("integer literal " + digits + " does not fit in 64 bits");
      lit->literal = value(static_cast<std::int64_t>(v));
      return lit;
    }
    case token_kind::floating: {
      auto lit = make(expr_kind::literal, line);
      lit->literal = value(std::strtod(next().text.c_str(), nullptr));
      return lit;
    }
    case token_kind::op: {
      if (skip_op("(")) {
        auto inner = parse_tuple(true, true);
        expect_op(")");
        return inner;
      }
      if (skip_op("[")) {
        auto list = make(expr_kind::list, line);
        while (!is_op("]")) {
          if (!list->args.empty()) expect_op(",");
          if (is_op("]")) break;
          list->args.push_back(parse_expression());
        }
        expect_op("]");
        return list;
      }
      if (skip_op("{")) {
        auto dict = make(expr_kind::dict, line);
        while (!is_op("}")) {
          if (!dict->args.empty()) expect_op(",");
          if (is_op("}")) break;
          dict->args.push_back(parse_expression());
          expect_op(":");
          dict->args.push_back(parse_expression());
        }
        expect_op("}");
        return dict;
      }
      break;
    }
    default: break;
  }
  fail("unexpected " + describe(t));
}

expr_ptr parser::parse_postfix(expr_ptr node) {
  while (true) {
    if (is_op(".")) {
      int line = next().line;
      if (cur().kind == token_kind::integer) {
        auto item = make(expr_kind::item, line);
        item->args.push_back(std::move(node));
        auto idx = make(expr_kind::literal, line);
        idx->literal = value(static_cast<std::int64_t>(std::strtoll(next().text.c_str(), nullptr, 10)));
        item->args.push_back(std::move(idx));
        node = std::move(item);
      } else {
        auto attr = make(expr_kind::attr, line, expect_name());
        attr->args.push_back(std::move(node));
        node = std::move(attr);
      }
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

expr_ptr parser::parse_call(expr_ptr callee) {
  auto call = make(expr_kind::call, cur().line);
  call->args.push_back(std::move(callee));
  parse_call_args(*call);
  return call;
}

expr_ptr parser::parse_filter_expr(expr_ptr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

expr_ptr parser::parse_subscript(expr_ptr node) {
  int line = next().line;  // '['
  expr_ptr parts[3];
  bool is_slice = false;
  if (!is_op(":")) parts[0] = parse_tuple(true);
  if (skip_op(":")) {
    is_slice = true;
    if (!is_op("]") && !is_op(":")) parts[1] = parse_expression();
    if (skip_op(":") && !is_op("]")) parts[2] = parse_expression();
  }
  expect_op("]");
  auto e = make(is_slice ? expr_kind::slice : expr_kind::item, line);
  e->args.push_back(std::move(node));
  if (is_slice) {
    for (auto& p : parts) e->args.push_back(std::move(p));
  } else {
    e->args.push_back(std::move(parts[0]));
  }
  return e;
}

expr_ptr parser::parse_filter(expr_ptr node) {
  while (skip_op("|")) {
    int line = cur().line;
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    if (!filters::find(name)) fail("No filter named '" + name + "'.");
    auto f = make(expr_kind::filter, line, std::move(name));
    f->args.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*f);
    node = std::move(f);
  }
  return node;
}

expr_ptr parser::parse_test(expr_ptr node) {
  int line = next().line;  // 'is'
  bool negated = skip_name("not");
  std::string name = expect_name();
  while (skip_op(".")) name += "." + expect_name();
  if (!is_known_test(name)) fail("No test named '" + name + "'.");
  auto t = make(expr_kind::test, line, std::move(name));
  t->negated = negated;
  t->args.push_back(std::move(node));
  const token& c = cur();
  if (is_op("(")) {
    parse_call_args(*t);
  } else if ((c.kind == token_kind::name || c.kind == token_kind::string || c.kind == token_kind::integer ||
              c.kind == token_kind::floating || is_op("[") || is_op("{")) &&
             !(c.kind == token_kind::name && (c.text == "else" || c.text == "or" || c.text == "and"))) {
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    t->args.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

void parser::parse_call_args(expr& call) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) fail("argument unpacking with * and ** is not supported");
    if (cur().kind == token_kind::name && peek().kind == token_kind::op && peek().text == "=") {
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call.kwargs.empty()) fail("positional argument after keyword argument");
      call.args.push_back(parse_expression());
    }
  }
  expect_op(")");
}

}  // namespace strata::chat
