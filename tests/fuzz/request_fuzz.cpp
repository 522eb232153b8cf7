// libFuzzer target: arbitrary bytes into every request parser of src/api. A parser must answer
// each input with a value or a 4xx error, never crash, hang or read out of bounds.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "src/api/chat_request.hpp"
#include "src/api/completion_request.hpp"
#include "src/api/tokenize_request.hpp"
#include "src/api/ws_envelope.hpp"

namespace {

template <class Result>
void check(const Result& r) {
  if (!r.has_value() && (r.err().status < 400 || r.err().status > 499)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace strata::api::schema;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  check(parse_chat_request(body));
  check(parse_completion_request(body));
  check(parse_tokenize_request(body));
  check(parse_detokenize_request(body));
  ws_envelope env;
  if (auto st = parse_ws_envelope(body, env); st && (st->status < 400 || st->status > 499)) std::abort();
  return 0;
}
