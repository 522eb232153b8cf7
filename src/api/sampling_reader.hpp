#pragma once
// Reads the shared sampling parameters out of a request body, one member at a time. Used by the
// chat and completion parsers' .cpp files.

#include <string_view>

#include "src/api/api_error.hpp"
#include "src/api/json_reader.hpp"
#include "src/api/sampling_params.hpp"

namespace strata::api::schema {

/// Collects the shared parameters of one body as its members stream past.
class sampling_reader {
 public:
  explicit sampling_reader(endpoint ep) : endpoint_(ep) {}

  /// Reads `value` when `key` is a shared parameter (setting `handled`); otherwise leaves it alone.
  api_status read(std::string_view key, od::value& value, bool& handled);

  /// Checks the rules that span members (top_logprobs needs logprobs; the max_tokens alias) and
  /// returns the parameters.
  api_result<sampling_params> finish();

 private:
  api_status read_stop(od::value& value);
  api_status read_logit_bias(od::value& value);
  api_status read_response_format(od::value& value);
  api_status read_grammar(std::string_view key, od::value& value);
  /// Records the grammar of member `field`; only one member may give one.
  api_status set_grammar(std::string_view field, sampling::grammar_spec spec);
  api_status read_logprobs(od::value& value);

  endpoint endpoint_;
  sampling_params params_;
  std::optional<std::int64_t> max_tokens_;
  std::optional<std::int64_t> max_completion_tokens_;
  bool top_logprobs_given_ = false;
};

}  // namespace strata::api::schema
