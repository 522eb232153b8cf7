#include "src/grammar/grammar_compiler.hpp"

#include <algorithm>
#include <exception>
#include <thread>

#include <xgrammar/xgrammar.h>

#include "src/grammar/compiled_grammar.hpp"
#include "src/grammar/structural_tag.hpp"
#include "src/tokenizer/tokenizer.hpp"

namespace strata::grammar {
namespace {

using kind = sampling::grammar_spec::kind;

/// JSON kinds without a reasoning block compile straight from their schema, written compactly:
/// JSON with free whitespace lets a model (a small one at a high temperature above all) pad
/// between items for as long as it likes.
xgrammar::CompiledGrammar compile_json(xgrammar::GrammarCompiler& c, const std::string& schema, bool strict) {
  return c.CompileJSONSchema(schema, /*any_whitespace=*/false, /*indent=*/std::nullopt, /*separators=*/std::nullopt, strict);
}

/// What an xgrammar error says, for a client: without its "[time] file:line: " prefix, and its
/// first lines only (some carry a grammar dump).
std::string client_message(std::string s) {
  if (!s.empty() && s[0] == '[')
    if (auto close = s.find("] "); close != std::string::npos)
      if (auto colon = s.find(": ", close); colon != std::string::npos) s.erase(0, colon + 2);
  std::size_t lines = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n' && ++lines == 4) {
      s.resize(i);
      break;
    }
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void put(std::string& key, std::string_view part) {
  key += std::to_string(part.size());
  key += ':';
  key += part;
}

}  // namespace

vocabulary vocabulary::of(const tokenizer::tokenizer& tok, std::int32_t n_logits) {
  vocabulary v;
  v.size = std::max(n_logits, tok.n_vocab());
  v.tokens.reserve(static_cast<std::size_t>(tok.n_vocab()));
  for (std::int32_t id = 0; id < tok.n_vocab(); ++id) {
    const auto t = tok.type(id);
    // Control (and unused) tokens are markup, not text: the engine sees them as empty, which it
    // never allows; the end-of-generation ones are the stop tokens.
    const bool text = t != tokenizer::token_type::control && t != tokenizer::token_type::unused;
    v.tokens.push_back(text ? tok.token_to_piece(id, false) : std::string());
    if (tok.is_eog(id)) v.stop_tokens.push_back(id);
  }
  return v;
}

std::string spec_key(const sampling::grammar_spec& spec) {
  std::string key;
  key += static_cast<char>('0' + static_cast<int>(spec.type));
  key += spec.strict ? 's' : '-';
  key += spec.parallel ? 'p' : '-';
  put(key, spec.text);
  put(key, spec.prefix);
  put(key, spec.separator);
  put(key, spec.suffix);
  put(key, spec.trigger);
  key += std::to_string(spec.calls.size());
  for (const auto& c : spec.calls) {
    put(key, c.begin);
    put(key, c.schema);
    put(key, c.end);
  }
  if (spec.reasoning) {
    key += 'r';
    put(key, spec.reasoning->open);
    put(key, spec.reasoning->close);
  }
  return key;
}

grammar_compiler::grammar_compiler(const vocabulary& v, std::size_t cache_entries, int threads)
    : vocab_size_(v.size), stop_tokens_(v.stop_tokens), capacity_(std::max<std::size_t>(cache_entries, 1)) {
  if (threads <= 0) threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  xgrammar::TokenizerInfo info(v.tokens, xgrammar::VocabType::RAW, v.size, v.stop_tokens, false);
  // Our cache keeps whole specs; xgrammar's own would hold a second copy of each grammar.
  xg_ = std::make_unique<xgrammar::GrammarCompiler>(info, threads, /*cache_enabled=*/false);
}

grammar_compiler::~grammar_compiler() = default;

compile_result grammar_compiler::compile(const sampling::grammar_spec& spec) const {
  std::string key = spec_key(spec);
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return {it->second->grammar, {}};
    }
    ++misses_;
  }
  // Compiled outside the lock: a long compile holds up no other request. Two requests with the
  // same new spec may both compile it; the second keeps the first's.
  compile_result r = compile_uncached(spec);
  if (!r) return r;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return {it->second->grammar, {}};
  lru_.push_front({key, r.grammar});
  index_.emplace(std::move(key), lru_.begin());
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  return r;
}

compile_result grammar_compiler::compile_uncached(const sampling::grammar_spec& spec) const {
  compile_result r;
  try {
    std::optional<xgrammar::CompiledGrammar> g;
    if (spec.reasoning || spec.type == kind::tool_calls) {
      auto tag = structural_tag_json(spec, r.error.call);
      if (!tag) {
        r.error.message = tag.err().message;
        return r;
      }
      g = xg_->CompileStructuralTag(*tag);
    } else if (spec.type == kind::json_object) {
      g = compile_json(*xg_, R"({"type": "object"})", false);
    } else if (spec.type == kind::json_schema) {
      g = compile_json(*xg_, spec.text, spec.strict);
    } else if (spec.type == kind::ebnf) {
      g = xg_->CompileGrammar(spec.text, "root");
    } else {
      r.error.message = "no grammar to compile";
      return r;
    }
    r.grammar = std::make_shared<const compiled_grammar>(std::move(*g), vocab_size_, stop_tokens_);
  } catch (const std::exception& e) {
    r.error.message = client_message(e.what());
    // Which call's schema is at fault: the first that does not compile alone.
    if (spec.type == kind::tool_calls && r.error.call < 0)
      for (std::size_t i = 0; i < spec.calls.size() && r.error.call < 0; ++i) {
        try {
          compile_json(*xg_, spec.calls[i].schema.empty() ? "{}" : spec.calls[i].schema, true);
        } catch (const std::exception&) {
          r.error.call = static_cast<int>(i);
        }
      }
  }
  return r;
}

std::uint64_t grammar_compiler::cache_hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

std::uint64_t grammar_compiler::cache_misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}

}  // namespace strata::grammar
