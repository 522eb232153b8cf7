#include "src/api/completion_request.hpp"

#include <algorithm>
#include <limits>

#include "src/api/json_reader.hpp"
#include "src/api/request_body.hpp"
#include "src/api/sampling_reader.hpp"

namespace strata::api::schema {
namespace {

constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();

api_error bad_prompt() {
  return invalid_request("prompt", "prompt must be a string, an array of strings, an array of token ids, or an array of arrays of token ids");
}

// `[id, id, ...]`: one prompt of token ids.
api_status read_ids(od::value& value, const std::string& param, std::vector<std::int32_t>& out) {
  return for_each_element(value, param, 3, [&](std::size_t i, od::value& v) -> api_status {
    std::optional<std::int64_t> id;
    if (auto e = read_integer(v, param + "[" + std::to_string(i) + "]", 0, int32_max, id)) return e;
    out.push_back(static_cast<std::int32_t>(*id));
    return std::nullopt;
  });
}

// `"text"`, `["text", ...]`, `[id, ...]` or `[[id, ...], ...]`: one kind throughout.
api_status read_prompt(od::value& value, completion_request& req, bool& given) {
  api_status st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  req.prompt_texts.clear();
  req.prompt_tokens.clear();
  given = true;
  if (t == od::json_type::string) {
    std::optional<std::string> s;
    if ((st = read_string(value, "prompt", s))) return st;
    req.prompt_texts.push_back(std::move(*s));
    return std::nullopt;
  }
  if (t != od::json_type::array) return bad_prompt();
  std::optional<od::json_type> kind;  // of the first element; every other must match
  std::vector<std::int32_t> ids;
  st = for_each_element(value, "prompt", 2, [&](std::size_t i, od::value& v) -> api_status {
    od::json_type et;
    if (auto e = type_of(v, et)) return e;
    if (!kind) kind = et;
    if (et != *kind) return bad_prompt();
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (et == od::json_type::number) {
      std::optional<std::int64_t> id;
      if (auto e = read_integer(v, param, 0, int32_max, id)) return e;
      ids.push_back(static_cast<std::int32_t>(*id));
      return std::nullopt;
    }
    if (i >= k_max_prompts)
      return invalid_request("prompt", "prompt may hold at most " + std::to_string(k_max_prompts) + " prompts");
    if (et == od::json_type::string) {
      std::optional<std::string> s;
      if (auto e = read_string(v, param, s)) return e;
      req.prompt_texts.push_back(std::move(*s));
      return std::nullopt;
    }
    if (et != od::json_type::array) return bad_prompt();
    std::vector<std::int32_t> one;
    if (auto e = read_ids(v, param, one)) return e;
    if (one.empty()) return invalid_request(param, param + " must not be an empty array");
    req.prompt_tokens.push_back(std::move(one));
    return std::nullopt;
  });
  if (st) return st;
  if (!kind) return invalid_request("prompt", "prompt must not be an empty array");
  if (!ids.empty()) req.prompt_tokens.push_back(std::move(ids));
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
      req.echo = echo.value_or(false);
      return std::nullopt;
    }
    if (key == "return_token_ids") {
      std::optional<bool> ids;
      if (auto e = read_bool(v, key, ids)) return e;
      req.return_token_ids = ids.value_or(false);
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
  if (req.return_token_ids && req.sampling.stream)
    return invalid_request("return_token_ids", "return_token_ids is given with non-streamed completions only");
  const std::size_t prompts = std::max(req.prompt_texts.size(), req.prompt_tokens.size());
  if (prompts * static_cast<std::size_t>(req.sampling.n) > 2 * k_max_prompts)
    return invalid_request("n", "prompts times n may be at most " + std::to_string(2 * k_max_prompts) + ", got " +
                                    std::to_string(prompts) + " prompts and n " + std::to_string(req.sampling.n));
  return req;
}

}  // namespace strata::api::schema
