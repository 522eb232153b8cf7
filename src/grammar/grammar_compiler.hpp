#pragma once
// grammar_compiler: turns a request's grammar_spec into a compiled_grammar for one model's
// vocabulary, with xgrammar's C++ core as the engine. Built once per model (the engine owns it);
// compile() is thread-safe (requests are prepared on several threads) and keeps the most recently
// used grammars, keyed by the spec's whole content, so a schema sent again costs nothing.
//
// What each spec kind compiles to:
//   json_object   any JSON object, written compactly (", " and ": " between items)
//   json_schema   JSON matching the schema, compactly; `strict` forbids properties and items the
//                 schema does not name (without it they are allowed, as JSON Schema says)
//   ebnf          the GBNF grammar as given; its start rule is `root`
//   tool_calls    prefix, one call (or several, separated, when parallel), suffix; each call is
//                 its begin text, JSON arguments matching its schema, and its end text
// With a reasoning block, the model may first write open ... close freely (or, when open is
// empty, the prompt has opened the block and the model writes up to close).

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/sampling/grammar_spec.hpp"

namespace xgrammar {
class GrammarCompiler;
}

namespace strata::tokenizer {
class tokenizer;
}

namespace strata::grammar {

class compiled_grammar;

/// The bytes of each token of a model, as the grammar engine matches them.
struct vocabulary {
  /// Token id -> the bytes it stands for; "" for control tokens (never allowed as text).
  std::vector<std::string> tokens;
  /// The end-of-generation tokens.
  std::vector<std::int32_t> stop_tokens;
  /// Logits per step (at least tokens.size(); ids beyond the tokens are never allowed).
  std::int32_t size = 0;

  /// The vocabulary of `tok`, for a model with n_logits logits per step.
  static vocabulary of(const tokenizer::tokenizer& tok, std::int32_t n_logits);
};

/// A spec that did not compile: why, and which of its tool calls (index into spec.calls) when one
/// call's schema is at fault, else -1.
struct compile_error {
  std::string message;
  int call = -1;
};

/// A compile's outcome: the grammar, or the error.
struct compile_result {
  std::shared_ptr<const compiled_grammar> grammar;
  compile_error error;
  explicit operator bool() const noexcept { return grammar != nullptr; }
};

class grammar_compiler {
 public:
  /// cache_entries: the compiled grammars kept (least recently used dropped first). threads: the
  /// threads one compile may use (0: up to 8, as the machine has).
  explicit grammar_compiler(const vocabulary& v, std::size_t cache_entries = 128, int threads = 0);
  ~grammar_compiler();
  grammar_compiler(const grammar_compiler&) = delete;
  grammar_compiler& operator=(const grammar_compiler&) = delete;

  /// The compiled grammar of `spec` (which must be active), from the cache when it was compiled
  /// before.
  compile_result compile(const sampling::grammar_spec& spec) const;

  /// Compiles served from the cache, and those that ran the engine (successful or not).
  std::uint64_t cache_hits() const;
  std::uint64_t cache_misses() const;
  std::int32_t vocab_size() const noexcept { return vocab_size_; }

 private:
  compile_result compile_uncached(const sampling::grammar_spec& spec) const;

  std::unique_ptr<xgrammar::GrammarCompiler> xg_;
  std::int32_t vocab_size_ = 0;
  std::vector<std::int32_t> stop_tokens_;
  std::size_t capacity_;

  // The cache: most recently used at the front of lru_; index_ maps a spec's key to its entry.
  struct entry {
    std::string key;
    std::shared_ptr<const compiled_grammar> grammar;
  };
  mutable std::mutex mu_;
  mutable std::list<entry> lru_;
  mutable std::unordered_map<std::string, std::list<entry>::iterator> index_;
  mutable std::uint64_t hits_ = 0, misses_ = 0;
};

/// The cache key of a spec: all of its content, each part length-prefixed.
std::string spec_key(const sampling::grammar_spec& spec);

}  // namespace strata::grammar
