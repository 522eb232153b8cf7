#pragma once
// The root members that the chat and the completions request bodies share.

#include <string>
#include <string_view>

#include "src/api/json_reader.hpp"
#include "src/api/parse_limits.hpp"
#include "src/api/sampling_reader.hpp"

namespace strata::api::schema {

/// Reads the endpoint's own root member `key` if it is one (and sets handled), else leaves it.
using own_member_fn = std::function<api_status(std::string_view key, od::value& value, bool& handled)>;

/// Reads a generation request body's root members in order: `model` into `model`, the endpoint's
/// own members through `own`, the sampling members through `sampling`; any other member is
/// skipped. Stops at the first error.
api_status read_request_body(std::string_view body, const parse_limits& limits, std::string& model,
                             sampling_reader& sampling, const own_member_fn& own);

}  // namespace strata::api::schema
