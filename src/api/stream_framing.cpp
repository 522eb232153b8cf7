#include "src/api/stream_framing.hpp"

#include "src/api/json_writer.hpp"
#include "src/api/response_writer.hpp"

namespace strata::api::schema {
namespace {

// The envelope up to its id; the id text came from parse_ws_envelope, which checked it.
void begin_frame(json_writer& w, std::string_view type, std::string_view id_json) {
  w.begin_object().member("type", type).key("id");
  if (id_json.empty()) w.null();
  else w.raw(id_json);
}

}  // namespace

std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out += "data: ";
  out += json;
  out += "\n\n";
  return out;
}

std::string_view sse_done() { return "data: [DONE]\n\n"; }

std::string_view sse_keep_alive() { return ": keep-alive\n\n"; }

std::string ws_chunk_frame(std::string_view id_json, std::string_view chunk_json) {
  json_writer w;
  begin_frame(w, "chunk", id_json);
  w.key("data").raw(chunk_json).end_object();
  return w.take();
}

std::string ws_done_frame(std::string_view id_json) {
  json_writer w;
  begin_frame(w, "done", id_json);
  w.end_object();
  return w.take();
}

std::string ws_error_frame(std::string_view id_json, const api_error& e) {
  // The error object is the inner part of write_error's body.
  std::string body = write_error(e);
  std::string_view inner(body);
  inner.remove_prefix(sizeof("{\"error\":") - 1);
  inner.remove_suffix(1);
  json_writer w;
  begin_frame(w, "error", id_json);
  w.key("error").raw(inner).end_object();
  return w.take();
}

}  // namespace strata::api::schema
