// The global functions every template sees: range, namespace, dict, joiner,
// raise_exception and strftime_now (as Hugging Face's apply_chat_template defines them).

#include <ctime>
#include <memory>

#include "src/chat/arguments.hpp"
#include "src/chat/evaluator.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {
namespace {

value_dict dict_from_args(call_args& a, std::string_view fn) {
  if (a.positional.size() > 1) throw_template_error(fn, " expected at most 1 argument, got ", std::to_string(a.positional.size()));
  value_dict d;
  if (!a.positional.empty()) {
    const value& src = a.positional[0];
    if (!src.is_dict() && !src.is_namespace()) throw_template_error(fn, "() argument must be a mapping");
    for (const auto& [k, v] : src.as_dict()) d.set(k, v);
  }
  for (auto& [k, v] : a.named) d.set(k, v);
  return d;
}

}  // namespace

void evaluator::install_globals(frame& root) {
  root.vars["range"] = value::function("range", [this](call_args& a) -> value {
    arguments args(a, "range", {"start", "stop", "step"});
    std::int64_t start = 0, stop = 0, step = 1;
    if (!args.has(0)) throw_template_error("range expected at least 1 argument, got 0");
    if (args.has(1)) {
      start = args.get_int(0, 0);
      stop = args.get_int(1, 0);
      step = args.get_int(2, 1);
    } else {
      stop = args.get_int(0, 0);
    }
    if (step == 0) throw_template_error("range() arg 3 must not be zero");
    value_list out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
      count_iterations(1);
      out.emplace_back(i);
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return value(std::move(out));
  });
  root.vars["namespace"] = value::function("namespace", [this](call_args& a) -> value {
    value ns = value::make_namespace(dict_from_args(a, "namespace"));
    namespaces_.push_back(ns);
    return ns;
  });
  root.vars["dict"] = value::function("dict", [](call_args& a) -> value { return value(dict_from_args(a, "dict")); });
  root.vars["raise_exception"] = value::function("raise_exception", [](call_args& a) -> value {
    arguments args(a, "raise_exception", {"message"});
    throw std::move(template_exception(to_str(args.get(0))).mark_raised_by_template());
  });
  root.vars["strftime_now"] = value::function("strftime_now", [this](call_args& a) -> value {
    arguments args(a, "strftime_now", {"format"});
    auto fmt = args.get_string(0);
    if (!fmt) throw_template_error("strftime_now() needs a format string");
    std::time_t t = std::chrono::system_clock::to_time_t(clock_ ? clock_() : std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[512];
    std::size_t n = fmt->empty() ? 0 : std::strftime(buf, sizeof buf, fmt->c_str(), &tm);
    if (n == 0 && !fmt->empty()) throw_template_error("strftime_now() format is too long or invalid");
    return value(std::string(buf, n));
  });
  root.vars["joiner"] = value::function("joiner", [](call_args& a) -> value {
    arguments args(a, "joiner", {"sep"});
    std::string sep = args.get_string(0).value_or(", ");
    auto used = std::make_shared<bool>(false);
    return value::function("joiner", [sep, used](call_args&) -> value {
      if (!*used) {
        *used = true;
        return value(std::string());
      }
      return value(sep);
    });
  });
}

}  // namespace strata::chat
