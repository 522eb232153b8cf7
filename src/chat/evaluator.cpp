#include "src/chat/evaluator.hpp"

#include "src/chat/operators.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {

evaluator::evaluator(render_limits limits, template_clock clock) : limits_(limits), clock_(std::move(clock)) {}

std::string evaluator::render(const std::vector<stmt_ptr>& body, const value_dict& context) {
  auto root = std::make_shared<frame>();
  install_globals(*root);
  for (const auto& [k, v] : context) root->vars[k] = v;
  auto top = std::make_shared<frame>();
  top->parent = root;
  std::string out;
  try {
    exec(body, top, out);
  } catch (...) {
    release_cycles();
    throw;
  }
  release_cycles();
  return out;
}

void evaluator::release_cycles() {
  // A namespace can hold itself (`set ns.me = ns`); emptying them all frees such cycles.
  for (auto& ns : namespaces_) ns.namespace_attrs() = value_dict{};
  namespaces_.clear();
  retained_frames_.clear();
}

void evaluator::count_iterations(std::uint64_t n) {
  if (n > limits_.max_loop_iterations || iterations_ > limits_.max_loop_iterations - n) {
    throw_template_error("template exceeded the limit of ", std::to_string(limits_.max_loop_iterations), " loop iterations");
  }
  iterations_ += n;
}

value evaluator::charge(value v) {
  std::uint64_t n = v.is_string() ? v.as_string().size() : v.is_list() ? v.as_list().size() * sizeof(value) : 0;
  computed_bytes_ += n;
  if (computed_bytes_ > limits_.max_computed_bytes) {
    throw_template_error("template computed more than ", std::to_string(limits_.max_computed_bytes),
                         " bytes of strings and lists");
  }
  return v;
}

void evaluator::append(std::string& out, const std::string& text) {
  bytes_written_ += text.size();
  if (bytes_written_ > limits_.max_output_bytes) {
    throw_template_error("template output exceeded the limit of ", std::to_string(limits_.max_output_bytes), " bytes");
  }
  out += text;
}

evaluator::flow evaluator::exec(const std::vector<stmt_ptr>& body, const frame_ptr& f, std::string& out) {
  for (const auto& s : body) {
    flow r = exec(*s, f, out);
    if (r != flow::normal) return r;
  }
  return flow::normal;
}

value evaluator::apply_filter_chain(const std::vector<expr_ptr>& filters, value v, const frame_ptr& f) {
  for (const auto& fe : filters) {
    call_args args = eval_args(*fe, 1, f);
    v = charge(apply_filter(fe->name, v, args));
  }
  return v;
}

evaluator::flow evaluator::exec(const stmt& s, const frame_ptr& f, std::string& out) {
  try {
    switch (s.kind) {
      case stmt_kind::text: append(out, s.text); return flow::normal;
      case stmt_kind::output: append(out, to_str(eval(*s.expr, f))); return flow::normal;
      case stmt_kind::if_:
        return eval(*s.condition, f).truthy() ? exec(s.body, f, out) : exec(s.else_body, f, out);
      case stmt_kind::for_: return exec_for(s, f, out);
      case stmt_kind::set: exec_set(s, f); return flow::normal;
      case stmt_kind::set_block: {
        std::string buf;
        exec(s.body, f, buf);
        assign(*s.target, apply_filter_chain(s.filters, value(std::move(buf)), f), f);
        return flow::normal;
      }
      case stmt_kind::filter_block: {
        std::string buf;
        exec(s.body, f, buf);
        append(out, to_str(apply_filter_chain(s.filters, value(std::move(buf)), f)));
        return flow::normal;
      }
      case stmt_kind::macro: f->vars[s.text] = make_macro(s, f, s.text); return flow::normal;
      case stmt_kind::call_block: {
        const expr& call_expr = *s.expr;
        value fn = eval(*call_expr.args[0], f);
        call_args args = eval_args(call_expr, 1, f);
        args.named.emplace_back("caller", make_macro(s, f, "caller"));
        append(out, to_str(call(fn, args)));
        return flow::normal;
      }
      case stmt_kind::break_: return flow::break_loop;
      case stmt_kind::continue_: return flow::continue_loop;
      case stmt_kind::block: return exec(s.body, f, out);
    }
  } catch (template_exception& e) {
    if (e.line() != 0) throw;
    template_exception located(e.message(), s.line, e.code());
    if (e.raised_by_template()) located.mark_raised_by_template();
    throw located;
  }
  return flow::normal;
}

void evaluator::assign(const expr& target, const value& v, const frame_ptr& f) {
  if (target.kind == expr_kind::name) {
    f->vars[target.name] = v;
    return;
  }
  if (target.kind == expr_kind::attr) {
    value obj = eval(*target.args[0], f);
    if (!obj.is_namespace()) throw_template_error("cannot assign attribute on non-namespace object");
    obj.namespace_attrs().set(target.name, v);
    return;
  }
  // Tuple unpacking.
  value_list items = iterate(v);
  if (items.size() != target.args.size()) {
    if (items.size() > target.args.size()) throw_template_error("too many values to unpack (expected ", std::to_string(target.args.size()), ")");
    throw_template_error("not enough values to unpack (expected ", std::to_string(target.args.size()), ", got ",
                         std::to_string(items.size()), ")");
  }
  for (std::size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i], f);
}

void evaluator::exec_set(const stmt& s, const frame_ptr& f) { assign(*s.target, eval(*s.expr, f), f); }

evaluator::flow evaluator::exec_for(const stmt& s, const frame_ptr& f, std::string& out) {
  value_list all = iterate(eval(*s.expr, f));
  value_list items;
  if (s.condition) {
    for (auto& item : all) {
      count_iterations(1);
      auto scope = std::make_shared<frame>();
      scope->parent = f;
      assign(*s.target, item, scope);
      if (eval(*s.condition, scope).truthy()) items.push_back(std::move(item));
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) {
    auto scope = std::make_shared<frame>();
    scope->parent = f;
    exec(s.else_body, scope, out);
    return flow::normal;
  }
  const auto n = static_cast<std::int64_t>(items.size());
  auto cycle_index = std::make_shared<std::int64_t>(0);
  value cycle = value::function("cycle", [cycle_index](call_args& a) -> value {
    if (a.positional.empty()) throw_template_error("no items for cycling given");
    return a.positional[static_cast<std::size_t>(*cycle_index % static_cast<std::int64_t>(a.positional.size()))];
  });
  for (std::int64_t i = 0; i < n; ++i) {
    count_iterations(1);
    *cycle_index = i;
    auto scope = std::make_shared<frame>();
    scope->parent = f;
    assign(*s.target, items[static_cast<std::size_t>(i)], scope);
    value_dict loop;
    loop.set("index", value(i + 1));
    loop.set("index0", value(i));
    loop.set("revindex", value(n - i));
    loop.set("revindex0", value(n - i - 1));
    loop.set("first", value(i == 0));
    loop.set("last", value(i == n - 1));
    loop.set("length", value(n));
    loop.set("depth", value(1));
    loop.set("depth0", value(0));
    if (i > 0) loop.set("previtem", items[static_cast<std::size_t>(i - 1)]);
    if (i + 1 < n) loop.set("nextitem", items[static_cast<std::size_t>(i + 1)]);
    loop.set("cycle", cycle);
    scope->vars["loop"] = value(std::move(loop));
    if (exec(s.body, scope, out) == flow::break_loop) break;
  }
  return flow::normal;
}

value evaluator::make_macro(const stmt& s, const frame_ptr& f, std::string name) {
  const stmt* def = &s;
  // The closure must not own its defining frame (the frame holds the closure); the evaluator
  // keeps the frame alive until the rendering ends.
  retained_frames_.push_back(f);
  std::weak_ptr<frame> weak = f;
  return value::function(name, [this, def, weak, name](call_args& a) -> value {
    if (call_depth_ >= limits_.max_call_depth) {
      throw_template_error("macro calls nested deeper than ", std::to_string(limits_.max_call_depth), " levels");
    }
    auto scope = std::make_shared<frame>();
    scope->parent = weak.lock();
    const auto& params = def->params;
    std::vector<bool> bound(params.size(), false);
    value_list varargs;
    for (std::size_t i = 0; i < a.positional.size(); ++i) {
      if (i < params.size()) {
        scope->vars[params[i]] = a.positional[i];
        bound[i] = true;
      } else if (def->uses_varargs) {
        varargs.push_back(a.positional[i]);
      } else {
        throw_template_error("macro '", name, "' takes not more than ", std::to_string(params.size()), " argument(s)");
      }
    }
    value_dict kwargs;
    for (auto& [key, v] : a.named) {
      std::size_t i = 0;
      while (i < params.size() && params[i] != key) ++i;
      if (i < params.size()) {
        if (bound[i]) throw_template_error("macro '", name, "' got multiple values for argument '", key, "'");
        scope->vars[key] = v;
        bound[i] = true;
      } else if (key == "caller" && def->uses_caller) {
        scope->vars["caller"] = v;
      } else if (def->uses_kwargs) {
        kwargs.set(key, v);
      } else {
        throw_template_error("macro '", name, "' takes no keyword argument '", key, "'");
      }
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      scope->vars[params[i]] = def->defaults[i] ? eval(*def->defaults[i], scope)
                                                : value::undefined("parameter '" + params[i] + "' was not provided");
    }
    scope->vars["varargs"] = value::tuple(std::move(varargs));
    scope->vars["kwargs"] = value(std::move(kwargs));
    ++call_depth_;
    std::string out;
    try {
      exec(def->body, scope, out);
    } catch (...) {
      --call_depth_;
      throw;
    }
    --call_depth_;
    return value(std::move(out));
  });
}

value evaluator::call(const value& fn, call_args& args) {
  require_defined(fn);
  if (!fn.is_function()) throw_template_error("'", std::string(fn.type_name()), "' object is not callable");
  return fn.as_function()(args);
}

}  // namespace strata::chat
