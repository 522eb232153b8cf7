#pragma once
// pre_tokenizer: splits text into the pieces byte-level BPE merges within, with the regexes of
// the model's tokenizer.ggml.pre (PCRE2, Unicode properties). Several regexes apply in turn:
// each splits every piece into its matches and the text between them.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.hpp"

namespace strata::tokenizer {

class pre_tokenizer {
 public:
  static result<std::unique_ptr<pre_tokenizer>> create(std::string_view pre);
  ~pre_tokenizer();
  pre_tokenizer(const pre_tokenizer&) = delete;
  pre_tokenizer& operator=(const pre_tokenizer&) = delete;

  /// The pieces of text, in order; their concatenation is text.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  pre_tokenizer() = default;
  struct regex;
  std::vector<std::unique_ptr<regex>> regexes_;
};

}  // namespace strata::tokenizer
