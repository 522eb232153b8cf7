#pragma once
// structural_tag: a grammar_spec written as an xgrammar structural tag (JSON), the form that
// composes the pieces a spec may have: a reasoning block, literal text around tool calls, a
// choice among calls, each call's JSON arguments under its schema.

#include <string>

#include "src/common/error.hpp"
#include "src/sampling/grammar_spec.hpp"

namespace strata::grammar {

/// Most whitespace characters in a row inside JSON in a structural tag (tool-call arguments, an
/// answer after reasoning): xgrammar lets such JSON carry any whitespace, and a bound keeps a
/// model from writing it forever.
inline constexpr int max_argument_whitespace = 8;

/// The structural tag of `spec` ({"type": "structural_tag", "format": ...}). An error (a schema
/// that is not JSON) names, in `call`, which of spec.calls it is in (-1: none).
result<std::string> structural_tag_json(const sampling::grammar_spec& spec, int& call);

}  // namespace strata::grammar
