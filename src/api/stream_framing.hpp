#pragma once
// Framing of streamed objects: Server-Sent Events for HTTP, JSON frames for the WebSocket endpoint.

#include <string>
#include <string_view>

#include "src/api/api_error.hpp"

namespace strata::api::schema {

/// `data: <json>\n\n`.
std::string sse_event(std::string_view json);
/// `data: [DONE]\n\n`, the end of every stream.
std::string_view sse_done();
/// `: keep-alive\n\n`, an SSE comment that clients ignore.
std::string_view sse_keep_alive();

/// `{"type":"chunk","id":ID,"data":CHUNK}`; `id_json` is the id as the client wrote it (empty: null)
/// and `chunk_json` a chunk object already serialized.
std::string ws_chunk_frame(std::string_view id_json, std::string_view chunk_json);
/// `{"type":"done","id":ID}`.
std::string ws_done_frame(std::string_view id_json);
/// `{"type":"error","id":ID,"error":{"message","type","param","code"}}`.
std::string ws_error_frame(std::string_view id_json, const api_error& e);

}  // namespace strata::api::schema
