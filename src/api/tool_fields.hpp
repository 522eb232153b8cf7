#pragma once
// The tool fields of a chat request, checked like every other field: `tools` and `tool_choice`.
// The server does not call tools; it only refuses ill-formed ones with a 400 naming the field.

#include <boost/json/value.hpp>

#include "src/api/api_error.hpp"

namespace strata::api::schema {

/// Checks `tools`: null (absent) or an array of
/// `{"type":"function","function":{"name","description"?,"parameters"?,"strict"?}}`, the name
/// matching ^[a-zA-Z0-9_-]{1,64}$. Other members are ignored; null optional members count as absent.
api_status check_tools(const boost::json::value& tools);

/// Checks `tool_choice`: null (absent), "none", "auto", "required", or
/// `{"type":"function","function":{"name":N}}` where N is the name of one of `tools`' functions.
api_status check_tool_choice(const boost::json::value& choice, const boost::json::value& tools);

}  // namespace strata::api::schema
