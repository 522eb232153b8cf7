#pragma once
// What the grammar tests share: one compiler over a real vocabulary (the tiny Qwen2
// model's byte-level BPE, 50k tokens), built once per test binary, and helpers to write specs and to feed
// text through a matcher as the model's tokens.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "src/grammar/grammar_compiler.hpp"
#include "src/grammar/grammar_matcher.hpp"
#include "src/model/gguf_file.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::grammar {

inline const tokenizer::tokenizer& fixture_tokenizer() {
  static const tokenizer::tokenizer tok = [] {
    auto f = model::gguf_file::open(std::string(STRATA_SHARED_DIR) + "/models/tiny-qwen2-gpt2-f16.gguf");
    if (!f) throw std::runtime_error(f.err().message);
    auto t = tokenizer::tokenizer::from_gguf(*f);
    if (!t) throw std::runtime_error(t.err().message);
    return std::move(*t);
  }();
  return tok;
}

inline const vocabulary& fixture_vocabulary() {
  static const vocabulary v = vocabulary::of(fixture_tokenizer(), fixture_tokenizer().n_vocab());
  return v;
}

inline const grammar_compiler& fixture() {
  static const grammar_compiler c(fixture_vocabulary());
  return c;
}

inline sampling::grammar_spec ebnf(std::string text) {
  sampling::grammar_spec s;
  s.type = sampling::grammar_spec::kind::ebnf;
  s.text = std::move(text);
  return s;
}

inline sampling::grammar_spec json_schema(std::string schema, bool strict) {
  sampling::grammar_spec s;
  s.type = sampling::grammar_spec::kind::json_schema;
  s.text = std::move(schema);
  s.strict = strict;
  return s;
}

struct text_match {
  bool accepted = false;   // every token of the text was allowed
  bool completed = false;  // and the grammar could end there
};

/// Feeds `text`, tokenized as the model would write it, through a fresh matcher.
inline text_match match_text(const compile_result& g, const std::string& text) {
  grammar_matcher m(g.grammar);
  for (auto t : fixture_tokenizer().encode(text, false, false))
    if (!m.accept(t)) return {};
  return {true, m.completed()};
}

}  // namespace strata::grammar
