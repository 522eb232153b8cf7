#pragma once
// compiled_grammar: a grammar_spec compiled against one model's vocabulary, immutable and shared
// by every sequence that samples under it (each keeps its own grammar_matcher). Only
// src/grammar/ sees inside: everything else holds it as an opaque shared_ptr<const ...>.

#include <cstdint>
#include <vector>

#include <xgrammar/xgrammar.h>

namespace strata::grammar {

class compiled_grammar {
 public:
  compiled_grammar(xgrammar::CompiledGrammar g, std::int32_t vocab_size, std::vector<std::int32_t> stop_tokens)
      : g_(std::move(g)), vocab_size_(vocab_size), stop_tokens_(std::move(stop_tokens)) {}

  const xgrammar::CompiledGrammar& xg() const noexcept { return g_; }
  /// Logits per step the mask covers (the model's vocabulary, padding included).
  std::int32_t vocab_size() const noexcept { return vocab_size_; }
  /// The end-of-generation tokens: allowed once the grammar is complete, and then only they.
  const std::vector<std::int32_t>& stop_tokens() const noexcept { return stop_tokens_; }

 private:
  xgrammar::CompiledGrammar g_;
  std::int32_t vocab_size_;
  std::vector<std::int32_t> stop_tokens_;
};

}  // namespace strata::grammar
