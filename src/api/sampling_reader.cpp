#include "src/api/sampling_reader.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

namespace strata::api::schema {
namespace {

constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();
constexpr std::size_t max_stop_strings = 4;

// Reads a number into `out` when present, checking it against [lo, hi] with open or closed ends.
api_status ranged(od::value& value, std::string_view param, double lo, double hi, bool lo_open, bool hi_open, float& out) {
  std::optional<double> x;
  if (auto st = read_number(value, param, x)) return st;
  if (!x) return std::nullopt;
  if (*x < lo || *x > hi || (lo_open && *x == lo) || (hi_open && *x == hi)) return out_of_range(param, lo, hi, lo_open, hi_open, *x);
  out = static_cast<float>(*x);
  return std::nullopt;
}

api_status bool_into(od::value& value, std::string_view param, bool& out) {
  std::optional<bool> b;
  if (auto st = read_bool(value, param, b)) return st;
  if (b) out = *b;
  return std::nullopt;
}

}  // namespace

api_status sampling_reader::read(std::string_view key, od::value& value, bool& handled) {
  handled = true;
  if (key == "stream") {
    std::optional<bool> stream;
    if (auto st = read_bool(value, key, stream)) return st;
    params_.stream = stream.value_or(false);
    return std::nullopt;
  }
  if (key == "stream_options") {
    api_status st;
    if (take_null(value, st) || st) return st;
    return for_each_member(value, key, 2, [&](std::string_view k, od::value& o) -> api_status {
      if (k != "include_usage") return skip_value(o, 3);
      std::optional<bool> include;
      if (auto e = read_bool(o, "stream_options.include_usage", include)) return e;
      params_.include_usage = include.value_or(false);
      return std::nullopt;
    });
  }
  if (key == "max_tokens") return read_integer(value, key, 1, int32_max, max_tokens_);
  if (key == "max_completion_tokens") return read_integer(value, key, 1, int32_max, max_completion_tokens_);
  if (key == "temperature") return ranged(value, key, 0, 2, false, false, params_.sampler.temperature);
  if (key == "top_p") return ranged(value, key, 0, 1, true, false, params_.sampler.top_p);
  if (key == "min_p") return ranged(value, key, 0, 1, false, false, params_.sampler.min_p);
  if (key == "presence_penalty") return ranged(value, key, -2, 2, false, false, params_.sampler.presence_penalty);
  if (key == "frequency_penalty") return ranged(value, key, -2, 2, false, false, params_.sampler.frequency_penalty);
  if (key == "repetition_penalty")
    return ranged(value, key, 0, std::numeric_limits<double>::max(), true, false, params_.sampler.repetition_penalty);
  if (key == "top_k") {
    std::optional<std::int64_t> k;
    if (auto st = read_integer(value, key, 0, int32_max, k)) return st;
    if (k) params_.sampler.top_k = static_cast<std::int32_t>(*k);
    return std::nullopt;
  }
  if (key == "seed") {
    std::optional<std::int64_t> s;
    if (auto st = read_integer(value, key, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), s))
      return st;
    if (s) params_.seed = s;
    return std::nullopt;
  }
  if (key == "n") {
    std::optional<std::int64_t> n;
    if (auto st = read_integer(value, key, 1, 16, n)) return st;
    if (n) params_.n = static_cast<int>(*n);
    return std::nullopt;
  }
  if (key == "stop") return read_stop(value);
  if (key == "logprobs") return read_logprobs(value);
  if (key == "top_logprobs" && endpoint_ == endpoint::chat) {
    std::optional<std::int64_t> k;
    if (auto st = read_integer(value, key, 0, 20, k)) return st;
    if (k) {
      params_.sampler.top_logprobs = static_cast<int>(*k);
      top_logprobs_given_ = *k > 0;
    }
    return std::nullopt;
  }
  if (key == "logit_bias") return read_logit_bias(value);
  if (key == "user") {
    std::optional<std::string> user;  // accepted and not used
    return read_string(value, key, user);
  }
  if (key == "ignore_eos") return bool_into(value, key, params_.ignore_eos);
  if (key == "parallel_tool_calls") return bool_into(value, key, params_.parallel_tool_calls);
  if (key == "kv_bits") {
    std::optional<std::int64_t> bits;
    api_status st = read_integer(value, key, 0, 64, bits);
    if (st || (bits && *bits != 4 && *bits != 8 && *bits != 16))
      return invalid_request("kv_bits", "kv_bits must be 4, 8 or 16", "invalid_kv_bits");
    if (bits) params_.kv_bits = static_cast<int>(*bits);
    return std::nullopt;
  }
  if (key == "cache_salt") {
    std::optional<std::string> salt;
    if (auto st = read_string(value, key, salt)) return st;
    if (salt && salt->empty()) return invalid_request("cache_salt", "cache_salt must not be empty");
    if (salt) params_.cache_salt = std::move(*salt);
    return std::nullopt;
  }
  if (key == "response_format") return read_response_format(value);
  if (key == "grammar" || key == "json_schema") return read_grammar(key, value);
  handled = false;
  return std::nullopt;
}

api_status sampling_reader::read_stop(od::value& value) {
  api_status st;
  if (take_null(value, st) || st) return st;
  od::json_type t;
  if ((st = type_of(value, t))) return st;
  std::vector<std::string> stop;
  if (t == od::json_type::string) {
    std::optional<std::string> s;
    if ((st = read_string(value, "stop", s))) return st;
    stop.push_back(std::move(*s));
  } else if (t == od::json_type::array) {
    st = for_each_element(value, "stop", 2, [&](std::size_t i, od::value& v) -> api_status {
      if (i >= max_stop_strings) return invalid_request("stop", "stop must hold at most 4 strings");
      std::optional<std::string> s;
      api_status e = read_string(v, "stop", s);
      if (e || !s) return invalid_request("stop", "stop must be a string or an array of strings");
      stop.push_back(std::move(*s));
      return std::nullopt;
    });
    if (st) return st;
  } else {
    return invalid_request("stop", "stop must be a string or an array of strings");
  }
  for (const auto& s : stop)
    if (s.empty()) return invalid_request("stop", "stop strings must not be empty");
  params_.stop = std::move(stop);
  return std::nullopt;
}

api_status sampling_reader::read_logprobs(od::value& value) {
  if (endpoint_ == endpoint::chat) {
    std::optional<bool> b;
    if (auto st = read_bool(value, "logprobs", b)) return st;
    if (b) params_.sampler.logprobs = *b;
    return std::nullopt;
  }
  // Completions: the number of alternatives per position; 0 still returns the chosen tokens'.
  std::optional<std::int64_t> k;
  if (auto st = read_integer(value, "logprobs", 0, 5, k)) return st;
  params_.sampler.logprobs = k.has_value();
  params_.sampler.top_logprobs = k ? static_cast<int>(*k) : 0;
  return std::nullopt;
}

api_status sampling_reader::read_logit_bias(od::value& value) {
  api_status st;
  if (take_null(value, st) || st) return st;
  std::vector<std::pair<std::int32_t, float>> bias;
  st = for_each_member(value, "logit_bias", 2, [&](std::string_view key, od::value& v) -> api_status {
    std::int64_t id = -1;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || key.empty() || id < 0 || id > int32_max)
      return invalid_request("logit_bias", "logit_bias keys must be token ids (non-negative integers), got \"" + std::string(key) + "\"");
    std::optional<double> b;
    if (auto e = read_number(v, "logit_bias", b)) return e;
    if (!b) return invalid_request("logit_bias", "logit_bias values must be numbers");
    if (*b < -100 || *b > 100) return out_of_range("logit_bias", -100.0, 100.0, false, false, *b);
    auto token = static_cast<std::int32_t>(id);
    for (auto& [t, x] : bias)
      if (t == token) {
        x = static_cast<float>(*b);
        return std::nullopt;
      }
    bias.emplace_back(token, static_cast<float>(*b));
    return std::nullopt;
  });
  if (st) return st;
  params_.sampler.logit_bias = std::move(bias);
  return std::nullopt;
}

api_result<sampling_params> sampling_reader::finish() {
  params_.max_tokens = max_completion_tokens_ ? max_completion_tokens_ : max_tokens_;
  if (max_completion_tokens_) params_.max_tokens_key = "max_completion_tokens";
  if (endpoint_ == endpoint::chat && top_logprobs_given_ && !params_.sampler.logprobs)
    return invalid_request("top_logprobs", "top_logprobs requires logprobs to be true");
  return params_;
}

}  // namespace strata::api::schema
