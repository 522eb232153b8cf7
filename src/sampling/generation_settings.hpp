#pragma once
// generation_settings: what one request asks of generation once the API has validated it; the
// API builds it and the scheduler runs it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/kv/kv_format.hpp"
#include "src/kv/prefix_hash.hpp"
#include "src/sampling/grammar_spec.hpp"
#include "src/sampling/sampling_params.hpp"

namespace strata::grammar {
class compiled_grammar;  // src/grammar: opaque here, so that sampling needs no grammar engine
}

namespace strata::sampling {

struct generation_settings {
  sampling_params sampling;
  std::int32_t max_tokens = 256;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  /// The format of the request's KV blocks (kv_bits).
  kv::kv_format kv_format = kv::kv_format::f16;
  /// The request's cache salt (its API key's and its cache_salt, digested): requests with different
  /// salts share no prefix block. Empty: the cache every unsalted request shares.
  kv::cache_salt cache_salt;
  /// What the output must match (response_format, forced tool calls, grammar); none by default.
  grammar_spec grammar;
  /// `grammar` compiled for the model (set when the request is prepared; null without one).
  /// Immutable, shared by the request's sequences, each sampling under its own matcher.
  std::shared_ptr<const grammar::compiled_grammar> compiled_grammar;
};

}  // namespace strata::sampling
