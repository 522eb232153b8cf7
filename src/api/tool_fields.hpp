#pragma once
// The tool fields of a chat request, checked like every other field: `tools` and `tool_choice`.
// The server does not call tools; it only refuses ill-formed ones with a 400 naming the field.

#include <optional>

#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"
#include "src/chat/tool_format.hpp"
#include "src/sampling/grammar_spec.hpp"

namespace strata::api::schema {

/// Checks `tools`: null (absent) or an array of
/// `{"type":"function","function":{"name","description"?,"parameters"?,"strict"?}}`, the name
/// matching ^[a-zA-Z0-9_-]{1,64}$. Other members are ignored; null optional members count as absent.
api_status check_tools(const boost::json::value& tools);

/// Checks `tool_choice`: null (absent), "none", "auto", "required", or
/// `{"type":"function","function":{"name":N}}` where N is the name of one of `tools`' functions.
api_status check_tool_choice(const boost::json::value& choice, const boost::json::value& tools);

/// The grammar that makes the model call a tool, written in format `f` (tools and choice already
/// checked): for tool_choice "required" any of `tools` (one call or, when `parallel` and the
/// format writes several, more); for a named function one call of it; for "auto" (or none given)
/// with strict tools, free text in which any call the model starts must complete with its schema's
/// arguments (Hermes and harmony formats; no grammar for the others, nor without strict tools). Each call's arguments follow its function's `parameters` schema. `reasoning`:
/// a thinking block the model may write first. Qwen3-Coder's XML calls are not JSON: no grammar.
sampling::grammar_spec forced_tool_grammar(const chat::tool_format& f, const boost::json::value& tools,
                                           const boost::json::value& choice, bool parallel,
                                           std::optional<sampling::grammar_spec::free_block> reasoning);

}  // namespace strata::api::schema
