#include "src/chat/parser.hpp"

#include <algorithm>

#include "src/chat/filters.hpp"
#include "src/chat/template_exception.hpp"

namespace strata::chat {

parser::depth_guard::depth_guard(parser& p) : p_(p) {
  if (++p_.depth_ > max_depth) {
    --p_.depth_;
    p_.fail("template nesting is too deep (over " + std::to_string(max_depth) + " levels)");
  }
}

const token& parser::peek(std::size_t ahead) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }

const token& parser::next() {
  const token& t = tokens_[pos_];
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool parser::skip_op(std::string_view op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool parser::skip_name(std::string_view n) {
  if (!is_name(n)) return false;
  next();
  return true;
}

void parser::expect_op(std::string_view op) {
  if (!skip_op(op)) fail("expected token '" + std::string(op) + "', got " + describe(cur()));
}

std::string parser::expect_name() {
  if (cur().kind != token_kind::name) fail("expected a name, got " + describe(cur()));
  return next().text;
}

void parser::expect(token_kind kind, std::string_view what) {
  if (cur().kind != kind) fail("expected " + std::string(what) + ", got " + describe(cur()));
  next();
}

void parser::fail(const std::string& message) const { throw template_exception(message, cur().line); }

std::string parser::describe(const token& t) const {
  switch (t.kind) {
    case token_kind::eof: return "end of template";
    case token_kind::block_end: return "end of statement block";
    case token_kind::var_end: return "end of print statement";
    case token_kind::text: return "template text";
    case token_kind::string: return "string literal";
    default: return "'" + t.text + "'";
  }
}

std::vector<stmt_ptr> parser::parse() {
  auto body = parse_body({});
  if (cur().kind != token_kind::eof) fail("unexpected " + describe(cur()));
  return body;
}

std::vector<stmt_ptr> parser::parse_body(std::initializer_list<std::string_view> end_tags) {
  depth_guard guard(*this);
  std::vector<stmt_ptr> body;
  while (true) {
    const token& t = cur();
    if (t.kind == token_kind::eof) {
      if (end_tags.size() == 0) return body;
      std::string wanted;
      for (auto tag : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
      fail("Unexpected end of template. Jinja was looking for the following tags: " + wanted + ".");
    }
    if (t.kind == token_kind::text) {
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::text;
      s->line = t.line;
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.kind == token_kind::var_begin) {
      next();
      auto s = std::make_unique<stmt>();
      s->kind = stmt_kind::output;
      s->line = t.line;
      s->expr = parse_tuple(true);
      expect(token_kind::var_end, "end of print statement");
      body.push_back(std::move(s));
    } else if (t.kind == token_kind::block_begin) {
      const token& tag = peek();
      if (tag.kind == token_kind::name &&
          std::find(end_tags.begin(), end_tags.end(), std::string_view(tag.text)) != end_tags.end()) {
        next();  // the caller reads the end tag's name
        return body;
      }
      next();
      body.push_back(parse_statement());
    } else {
      fail("unexpected " + describe(t));
    }
  }
}

void parser::end_tag(std::string_view name) {
  if (!skip_name(name)) fail("expected '" + std::string(name) + "', got " + describe(cur()));
  expect(token_kind::block_end, "end of statement block");
}

stmt_ptr parser::parse_statement() {
  if (cur().kind != token_kind::name) fail("tag name expected, got " + describe(cur()));
  const std::string tag = cur().text;
  int line = cur().line;
  if (tag == "if") return parse_if();
  if (tag == "for") return parse_for();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "call") return parse_call_block();
  if (tag == "filter") return parse_filter_block();
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
    next();
    expect(token_kind::block_end, "end of statement block");
    auto s = std::make_unique<stmt>();
    s->kind = tag == "break" ? stmt_kind::break_ : stmt_kind::continue_;
    s->line = line;
    return s;
  }
  if (tag == "generation") {
    next();
    expect(token_kind::block_end, "end of statement block");
    auto s = std::make_unique<stmt>();
    s->kind = stmt_kind::block;
    s->line = line;
    s->body = parse_body({"endgeneration"});
    end_tag("endgeneration");
    return s;
  }
  fail("Encountered unknown tag '" + tag + "'.");
}

stmt_ptr parser::parse_if() {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::if_;
  s->line = next().line;  // 'if' or 'elif'
  s->condition = parse_tuple(false);
  expect(token_kind::block_end, "end of statement block");
  s->body = parse_body({"elif", "else", "endif"});
  if (is_name("elif")) {
    depth_guard guard(*this);
    s->else_body.push_back(parse_if());
    return s;
  }
  if (skip_name("else")) {
    expect(token_kind::block_end, "end of statement block");
    s->else_body = parse_body({"endif"});
  }
  end_tag("endif");
  return s;
}

stmt_ptr parser::parse_for() {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::for_;
  s->line = next().line;
  s->target = parse_assign_target(false);
  if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
  s->expr = parse_tuple(false);
  if (skip_name("if")) s->condition = parse_expression(true);
  if (is_name("recursive")) fail("recursive loops are not supported");
  expect(token_kind::block_end, "end of statement block");
  ++loop_depth_;
  s->body = parse_body({"endfor", "else"});
  --loop_depth_;
  if (skip_name("else")) {
    expect(token_kind::block_end, "end of statement block");
    s->else_body = parse_body({"endfor"});
  }
  end_tag("endfor");
  return s;
}

expr_ptr parser::parse_assign_target(bool allow_attr) {
  auto one = [&]() -> expr_ptr {
    int line = cur().line;
    auto n = make(expr_kind::name, line, expect_name());
    if (allow_attr && skip_op(".")) {
      auto a = make(expr_kind::attr, line, expect_name());
      a->args.push_back(std::move(n));
      return a;
    }
    return n;
  };
  bool parens = skip_op("(");
  auto first = one();
  if (!is_op(",")) {
    if (parens) expect_op(")");
    return first;
  }
  auto t = make(expr_kind::tuple, first->line);
  t->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().kind != token_kind::name) break;
    t->args.push_back(one());
  }
  if (parens) expect_op(")");
  return t;
}

stmt_ptr parser::parse_set() {
  auto s = std::make_unique<stmt>();
  s->line = next().line;
  s->target = parse_assign_target(true);
  if (skip_op("=")) {
    s->kind = stmt_kind::set;
    s->expr = parse_tuple(true);
    expect(token_kind::block_end, "end of statement block");
    return s;
  }
  if (s->target->kind != expr_kind::name) fail("a block assignment needs a plain name");
  s->kind = stmt_kind::set_block;
  parse_filter_chain(s->filters);
  expect(token_kind::block_end, "end of statement block");
  s->body = parse_body({"endset"});
  end_tag("endset");
  return s;
}

void parser::parse_params(stmt& s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s.params.empty()) expect_op(",");
    if (is_op(")")) break;
    s.params.push_back(expect_name());
    s.defaults.push_back(skip_op("=") ? parse_expression() : nullptr);
  }
  expect_op(")");
}

stmt_ptr parser::parse_macro() {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::macro;
  s->line = next().line;
  s->text = expect_name();
  parse_params(*s);
  expect(token_kind::block_end, "end of statement block");
  int saved_loops = loop_depth_;
  loop_depth_ = 0;
  open_macros_.push_back(s.get());
  s->body = parse_body({"endmacro"});
  open_macros_.pop_back();
  loop_depth_ = saved_loops;
  end_tag("endmacro");
  return s;
}

stmt_ptr parser::parse_call_block() {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::call_block;
  s->line = next().line;
  if (is_op("(")) parse_params(*s);
  s->expr = parse_expression();
  if (s->expr->kind != expr_kind::call) fail("expected a call after 'call'");
  expect(token_kind::block_end, "end of statement block");
  int saved_loops = loop_depth_;
  loop_depth_ = 0;
  open_macros_.push_back(s.get());
  s->body = parse_body({"endcall"});
  open_macros_.pop_back();
  loop_depth_ = saved_loops;
  end_tag("endcall");
  return s;
}

void parser::parse_filter_chain(std::vector<expr_ptr>& out) {
  while (skip_op("|")) {
    auto f = make(expr_kind::filter, cur().line, expect_name());
    if (!filters::find(f->name)) fail("No filter named '" + f->name + "'.");
    f->args.push_back(nullptr);
    if (is_op("(")) parse_call_args(*f);
    out.push_back(std::move(f));
  }
}

stmt_ptr parser::parse_filter_block() {
  auto s = std::make_unique<stmt>();
  s->kind = stmt_kind::filter_block;
  s->line = cur().line;
  // `filter upper | trim` reads like a chain that starts without its first pipe.
  tokens_[pos_] = token{token_kind::op, "|", s->line};
  parse_filter_chain(s->filters);
  expect(token_kind::block_end, "end of statement block");
  s->body = parse_body({"endfilter"});
  end_tag("endfilter");
  return s;
}

}  // namespace strata::chat
