// Filters over sequences and mappings: length, first, join, sort, map, select, ...

#include <algorithm>

#include "src/chat/arguments.hpp"
#include "src/chat/evaluator.hpp"
#include "src/chat/filters.hpp"
#include "src/chat/operators.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/text.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat::filters {
namespace {

// The key a case-insensitive comparison uses: strings in lower case.
value fold(const value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? value(text::lower(v.as_string())) : v;
}

value key_of(const value& item, const std::optional<std::string>& attribute, bool case_sensitive) {
  return fold(attribute ? get_path(item, *attribute) : item, case_sensitive);
}

void stable_sort_by(value_list& items, const std::vector<value>& keys, bool reverse) {
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return reverse ? less_than(keys[b], keys[a]) : less_than(keys[a], keys[b]);
  });
  value_list out;
  out.reserve(items.size());
  for (auto i : order) out.push_back(std::move(items[i]));
  items = std::move(out);
}

// select/reject/selectattr/rejectattr: keeps the items whose (attribute's) test result is `keep`.
value filter_items(evaluator& ev, const value& v, call_args& a, bool by_attribute, bool keep, const char* name) {
  std::vector<value> pos = a.positional;
  std::optional<std::string> attribute;
  if (by_attribute) {
    if (pos.empty() || !pos[0].is_string()) throw_template_error(name, "() needs an attribute name");
    attribute = pos[0].as_string();
    pos.erase(pos.begin());
  }
  std::optional<std::string> test;
  if (!pos.empty()) {
    if (!pos[0].is_string()) throw_template_error(name, "() needs a test name");
    test = pos[0].as_string();
    pos.erase(pos.begin());
  }
  value_list out;
  for (const auto& item : iterate(v)) {
    value subject = attribute ? get_path(item, *attribute) : item;
    bool result;
    if (test) {
      call_args targs{pos, a.named};
      result = ev.apply_test(*test, subject, targs);
    } else {
      result = subject.truthy();
    }
    if (result == keep) out.push_back(item);
  }
  return value(std::move(out));
}

value aggregate(const value& v, call_args& a, const char* name, bool want_max) {
  arguments args(a, name, {"case_sensitive", "attribute"});
  auto attribute = args.get_string(1);
  bool cs = args.get_bool(0, false);
  value best;
  value best_key;
  bool found = false;
  for (const auto& item : iterate(v)) {
    value k = key_of(item, attribute, cs);
    if (!found || (want_max ? less_than(best_key, k) : less_than(k, best_key))) {
      best = item;
      best_key = k;
      found = true;
    }
  }
  return found ? best : value::undefined("No aggregated item, sequence was empty.");
}

}  // namespace

value get_path(const value& obj, const std::string& path) {
  value cur = obj;
  for (const auto& part : text::split(path, std::string("."), -1)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits ? get_item(cur, value(static_cast<std::int64_t>(std::stoll(part)))) : get_item(cur, value(part));
  }
  return cur;
}

value length(evaluator&, const value& v, call_args& a) {
  arguments args(a, "length", {});
  switch (v.kind()) {
    case value_kind::undefined: return value(0);
    case value_kind::string: return value(static_cast<std::int64_t>(text::length(v.as_string())));
    case value_kind::list: return value(static_cast<std::int64_t>(v.as_list().size()));
    case value_kind::dict: return value(static_cast<std::int64_t>(v.as_dict().size()));
    default: throw_template_error("object of type '", std::string(v.type_name()), "' has no len()");
  }
}

value first(evaluator&, const value& v, call_args& a) {
  arguments args(a, "first", {});
  value_list items = iterate(v);
  return items.empty() ? value::undefined("No first item, sequence was empty.") : items.front();
}

value last(evaluator&, const value& v, call_args& a) {
  arguments args(a, "last", {});
  value_list items = iterate(v);
  return items.empty() ? value::undefined("No last item, sequence was empty.") : items.back();
}

value join(evaluator& ev, const value& v, call_args& a) {
  arguments args(a, "join", {"d", "attribute"});
  std::string sep = to_str(args.get_or(0, value(std::string())));
  auto attribute = args.get_string(1);
  std::string out;
  bool first_item = true;
  for (const auto& item : iterate(v)) {
    if (!first_item) out += sep;
    first_item = false;
    out += to_str(attribute ? get_path(item, *attribute) : item);
    if (out.size() > ev.limits().max_output_bytes) throw_template_error("result of join is too large");
  }
  return value(std::move(out));
}

value list(evaluator&, const value& v, call_args& a) {
  arguments args(a, "list", {});
  return value(iterate(v));
}

value items(evaluator&, const value& v, call_args& a) {
  arguments args(a, "items", {});
  if (v.is_undefined()) return value(value_list{});
  if (!v.is_dict()) throw_template_error("Can only get item pairs from a mapping.");
  value_list out;
  for (const auto& [k, item] : v.as_dict()) out.push_back(value::tuple(value_list{value(k), item}));
  return value(std::move(out));
}

value dictsort(evaluator&, const value& v, call_args& a) {
  arguments args(a, "dictsort", {"case_sensitive", "by", "reverse"});
  require_defined(v);
  if (!v.is_dict()) throw_template_error("'", std::string(v.type_name()), "' object has no attribute 'items'");
  std::string by = args.get_string(1).value_or("key");
  if (by != "key" && by != "value") throw_template_error("You can only sort by either 'key' or 'value'");
  value_list pairs;
  std::vector<value> keys;
  for (const auto& [k, item] : v.as_dict()) {
    pairs.push_back(value::tuple(value_list{value(k), item}));
    keys.push_back(fold(by == "key" ? value(k) : item, args.get_bool(0, false)));
  }
  stable_sort_by(pairs, keys, args.get_bool(2, false));
  return value(std::move(pairs));
}

value unique(evaluator&, const value& v, call_args& a) {
  arguments args(a, "unique", {"case_sensitive", "attribute"});
  auto attribute = args.get_string(1);
  value_list out;
  std::vector<value> seen;
  for (const auto& item : iterate(v)) {
    value k = key_of(item, attribute, args.get_bool(0, false));
    if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return values_equal(s, k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return value(std::move(out));
}

value reverse(evaluator&, const value& v, call_args& a) {
  arguments args(a, "reverse", {});
  if (v.is_string()) {
    auto cps = text::code_points(v.as_string());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return value(std::move(out));
  }
  value_list items = iterate(v);
  std::reverse(items.begin(), items.end());
  return value(std::move(items));
}

value sort(evaluator&, const value& v, call_args& a) {
  arguments args(a, "sort", {"reverse", "case_sensitive", "attribute"});
  value_list items = iterate(v);
  auto attribute = args.get_string(2);
  std::vector<value> keys;
  for (const auto& item : items) keys.push_back(key_of(item, attribute, args.get_bool(1, false)));
  stable_sort_by(items, keys, args.get_bool(0, false));
  return value(std::move(items));
}

value map(evaluator& ev, const value& v, call_args& a) {
  value_list out;
  const value* attribute = nullptr;
  const value* fallback = nullptr;
  for (const auto& [k, item] : a.named) {
    if (k == "attribute") attribute = &item;
    else if (k == "default") fallback = &item;
  }
  if (attribute) {
    if (!attribute->is_string()) throw_template_error("map(): attribute must be a string");
    for (const auto& item : iterate(v)) {
      value r = get_path(item, attribute->as_string());
      out.push_back(r.is_undefined() && fallback ? *fallback : r);
    }
    return value(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string()) throw_template_error("map requires a filter argument");
  std::string filter = a.positional[0].as_string();
  for (const auto& item : iterate(v)) {
    call_args fargs{std::vector<value>(a.positional.begin() + 1, a.positional.end()), a.named};
    out.push_back(ev.apply_filter(filter, item, fargs));
  }
  return value(std::move(out));
}

value select(evaluator& ev, const value& v, call_args& a) { return filter_items(ev, v, a, false, true, "select"); }
value reject(evaluator& ev, const value& v, call_args& a) { return filter_items(ev, v, a, false, false, "reject"); }
value selectattr(evaluator& ev, const value& v, call_args& a) { return filter_items(ev, v, a, true, true, "selectattr"); }
value rejectattr(evaluator& ev, const value& v, call_args& a) { return filter_items(ev, v, a, true, false, "rejectattr"); }

value sum(evaluator& ev, const value& v, call_args& a) {
  arguments args(a, "sum", {"attribute", "start"});
  auto attribute = args.get_string(0);
  value total = args.get_or(1, value(0));
  for (const auto& item : iterate(v)) {
    total = binary_operation("+", total, attribute ? get_path(item, *attribute) : item, ev.limits().max_output_bytes);
  }
  return total;
}

value min(evaluator&, const value& v, call_args& a) { return aggregate(v, a, "min", false); }
value max(evaluator&, const value& v, call_args& a) { return aggregate(v, a, "max", true); }

value batch(evaluator&, const value& v, call_args& a) {
  arguments args(a, "batch", {"linecount", "fill_with"});
  std::int64_t n = args.get_int(0, 0);
  if (n <= 0) throw_template_error("batch(): linecount must be positive");
  value_list out, cur;
  for (const auto& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<std::int64_t>(cur.size()) == n) {
      out.emplace_back(std::move(cur));
      cur = value_list{};
    }
  }
  if (!cur.empty()) {
    if (args.has(1) && !args.get(1).is_none()) {
      while (static_cast<std::int64_t>(cur.size()) < n) cur.push_back(args.get(1));
    }
    out.emplace_back(std::move(cur));
  }
  return value(std::move(out));
}

}  // namespace strata::chat::filters
