#include "src/api/completion_request.hpp"

#include <limits>

#include "src/api/json_reader.hpp"
#include "src/api/request_body.hpp"
#include "src/api/sampling_reader.hpp"

namespace strata::api::schema {
namespace {

constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();

api_error bad_prompt() {
  return invalid_request("prompt", "prompt must be a string, an array of one string, or an array of token ids");
}

// `"text"`, `["text"]` or `[id, id, ...]`.
api_status read_prompt(od::value& value, completion_request& req, bool& given) {
  api_status st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  req.prompt_text.clear();
  req.prompt_tokens.clear();
  given = true;
  if (t == od::json_type::string) {
    std::optional<std::string> s;
    if ((st = read_string(value, "prompt", s))) return st;
    req.prompt_text = std::move(*s);
    return std::nullopt;
  }
  if (t != od::json_type::array) return bad_prompt();
  std::size_t strings = 0, ids = 0;
  st = for_each_element(value, "prompt", 2, [&](std::size_t i, od::value& v) -> api_status {
    od::json_type et;
    if (auto e = type_of(v, et)) return e;
    if (et == od::json_type::string && ids == 0) {
      if (++strings > 1) return invalid_request("prompt", "prompt arrays of more than one string are not supported");
      std::optional<std::string> s;
      if (auto e = read_string(v, "prompt", s)) return e;
      req.prompt_text = std::move(*s);
      return std::nullopt;
    }
    if (et == od::json_type::number && strings == 0) {
      ++ids;
      std::optional<std::int64_t> id;
      std::string param = "prompt[" + std::to_string(i) + "]";
      if (auto e = read_integer(v, param, 0, int32_max, id)) return e;
      req.prompt_tokens.push_back(static_cast<std::int32_t>(*id));
      return std::nullopt;
    }
    return bad_prompt();
  });
  if (st) return st;
  if (strings == 0 && ids == 0) return invalid_request("prompt", "prompt must not be an empty array");
  return std::nullopt;
}

}  // namespace

api_result<completion_request> parse_completion_request(std::string_view body, const parse_limits& limits) {
  completion_request req;
  sampling_reader sampling(endpoint::completions);
  bool has_prompt = false;
  api_status st = read_request_body(body, limits, req.model, sampling, [&](std::string_view key, od::value& v, bool& handled) -> api_status {
    handled = true;
    if (key == "prompt") return read_prompt(v, req, has_prompt);
    if (key == "echo") {
      std::optional<bool> echo;
      if (auto e = read_bool(v, key, echo)) return e;
      if (echo.value_or(false)) return invalid_request("echo", "echo is not supported; send echo: false or leave it out");
      return std::nullopt;
    }
    if (key == "suffix") {
      std::optional<std::string> suffix;
      if (auto e = read_string(v, key, suffix)) return e;
      if (suffix && !suffix->empty()) return invalid_request("suffix", "suffix (insertion) is not supported");
      return std::nullopt;
    }
    handled = false;
    return std::nullopt;
  });
  if (st) return std::move(*st);
  if (!has_prompt) return invalid_request("prompt", "prompt is required");
  auto params = sampling.finish();
  if (!params) return std::move(params).err();
  req.sampling = std::move(params).value();
  return req;
}

}  // namespace strata::api::schema
