#pragma once
// The body of one tool-call block in each format, read into calls (without ids).

#include <optional>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "src/chat/tool_format.hpp"

namespace strata::chat {

struct tool_call;

/// The calls in `body`, or nothing when it is not a well-formed block of `syntax`:
/// hermes: `{"name": N, "arguments": {...}}`; llama3_json and json_list: such an object or a list
/// of them ("parameters" for "arguments" too); qwen3_xml: `<function=N><parameter=p>v</parameter>...</function>`.
/// Arguments come back as compact JSON text; a string given for them must itself be a JSON object.
/// `tools` (qwen3_xml): a parameter whose schema type is "string" stays a string.
std::optional<std::vector<tool_call>> parse_call_body(tool_syntax syntax, std::string_view body, const boost::json::value& tools);

/// Harmony's body (JSON arguments) for the function `name`.
std::optional<tool_call> parse_harmony_call(std::string_view name, std::string_view body);

}  // namespace strata::chat
