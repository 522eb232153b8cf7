#pragma once
// pre_tokenizer: splits text into the words that byte-level BPE merges within, with the regexes
// that the model's tokenizer.ggml.pre names (PCRE2, UTF mode, JIT-compiled once). Several regexes
// apply in turn: each splits every piece into its matches and the text between them.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.hpp"

namespace strata::tokenizer {

class pre_tokenizer {
 public:
  /// The pre-tokenizer named by tokenizer.ggml.pre; "" and "default" give the default one. An
  /// unknown name is errc::not_found (the caller decides whether to fall back).
  static result<std::unique_ptr<pre_tokenizer>> create(std::string_view name);
  ~pre_tokenizer();
  pre_tokenizer(const pre_tokenizer&) = delete;
  pre_tokenizer& operator=(const pre_tokenizer&) = delete;

  /// Appends the pieces of text to out, in order; their concatenation is text. Bytes that are not
  /// valid UTF-8 never reach a regex: each is a piece of its own. Thread-safe.
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  /// Whether a word that is itself a token skips merging (llama3-style vocabularies).
  bool ignore_merges() const { return ignore_merges_; }
  /// Whether this vocabulary family adds BOS by default (when add_bos_token is absent).
  bool adds_bos() const { return adds_bos_; }

 private:
  pre_tokenizer() = default;
  struct regex;
  void apply(const regex& re, std::string_view piece, std::vector<std::string_view>& out) const;

  std::vector<std::unique_ptr<regex>> regexes_;
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
};

}  // namespace strata::tokenizer
