#pragma once
// Logging setup (spdlog) and the request-id convention.
//
// A line about a request starts with its id in brackets: "[req-1f2e3d4c5b6a7980] ...". In JSON
// mode that prefix becomes the "request_id" field, so every such line can be filtered by it.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace strata::log {

/// Sets the global level and format. `level` is trace|debug|info|warn|error|off; `json` writes one
/// JSON object per line: {"ts":..., "level":..., "request_id":..., "msg":...}.
void init(std::string_view level, bool json);

/// The formatter init() installs: text, or JSON lines.
std::unique_ptr<spdlog::formatter> make_formatter(bool json);

/// A fresh request id: "req-" and 16 hex digits, unique within the process.
std::string new_request_id();

/// Escapes s for a JSON string body (no quotes added).
std::string json_escape(std::string_view s);

/// The access-log line for a finished request: method, path, status, its tokens as its usage
/// reported them (`tokens=PROMPT+GENERATED cached=CACHED`, cached being the prompt tokens reused
/// from the prefix cache) and milliseconds, then ` key=NAME` when the request's API key has a name.
void access(std::string_view request_id, std::string_view method, std::string_view path, int status,
            std::int64_t prompt_tokens, std::int64_t cached_tokens, std::int64_t completion_tokens, double ms,
            std::string_view key_name = {});

}  // namespace strata::log
