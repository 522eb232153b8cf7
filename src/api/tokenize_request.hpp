#pragma once
// The bodies of POST /tokenize and POST /detokenize, shaped as llama.cpp's server takes them.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/api/api_error.hpp"
#include "src/api/parse_limits.hpp"

namespace strata::api::schema {

/// `{"model"?, "content": string, "add_special"?: bool, "parse_special"?: bool, "with_pieces"?: bool}`;
/// `prompt` is accepted as another name for `content`.
struct tokenize_request {
  std::string model;
  std::string content;
  /// Add the model's BOS/EOS as its tokenizer config says (default false, as llama.cpp).
  bool add_special = false;
  /// Turn special-token text such as "<|im_start|>" into its id (default true, as llama.cpp).
  bool parse_special = true;
  /// Answer `{"tokens":[{"id","piece"}]}` instead of `{"tokens":[ids]}`.
  bool with_pieces = false;
};

/// `{"tokens": [ids]}`.
struct detokenize_request {
  std::vector<std::int32_t> tokens;
};

/// Parses a /tokenize body; `content` (or `prompt`) is required.
api_result<tokenize_request> parse_tokenize_request(std::string_view body, const parse_limits& limits = default_limits);

/// Parses a /detokenize body; `tokens` is required, each a token id in [0, 2^31).
api_result<detokenize_request> parse_detokenize_request(std::string_view body, const parse_limits& limits = default_limits);

}  // namespace strata::api::schema
