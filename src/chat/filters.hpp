#pragma once
// The filters of `value | name(args)`: jinja2's built-in filters (with Hugging Face's tojson).

#include <string>
#include <string_view>

#include "src/chat/value.hpp"

namespace strata::chat {

class evaluator;

namespace filters {

/// A filter: the evaluator (for nested filters and tests and the limits), the operand, the args.
using filter_fn = value (*)(evaluator&, const value&, call_args&);

/// The filter called `name`, or nullptr.
filter_fn find(std::string_view name);

/// `obj.a.b.0`: jinja2's dotted attribute paths used by map, sort, selectattr, ...
value get_path(const value& obj, const std::string& path);

// Filters on sequences (filters_sequences.cpp).
value length(evaluator&, const value&, call_args&);
value first(evaluator&, const value&, call_args&);
value last(evaluator&, const value&, call_args&);
value join(evaluator&, const value&, call_args&);
value list(evaluator&, const value&, call_args&);
value items(evaluator&, const value&, call_args&);
value dictsort(evaluator&, const value&, call_args&);
value unique(evaluator&, const value&, call_args&);
value reverse(evaluator&, const value&, call_args&);
value sort(evaluator&, const value&, call_args&);
value map(evaluator&, const value&, call_args&);
value select(evaluator&, const value&, call_args&);
value reject(evaluator&, const value&, call_args&);
value selectattr(evaluator&, const value&, call_args&);
value rejectattr(evaluator&, const value&, call_args&);
value sum(evaluator&, const value&, call_args&);
value min(evaluator&, const value&, call_args&);
value max(evaluator&, const value&, call_args&);
value batch(evaluator&, const value&, call_args&);

}  // namespace filters
}  // namespace strata::chat
