#pragma once
// grammar_spec: what a request's output must match, as the API validated it. The engine compiles
// it (cached by its text) into a per-token mask that the sequence's sampler applies before each
// draw; a request without one samples freely.

#include <optional>
#include <string>
#include <vector>

namespace strata::sampling {

struct grammar_spec {
  enum class kind {
    none,         // unconstrained
    json_object,  // any JSON object (response_format json_object)
    json_schema,  // `text` is a JSON schema (response_format json_schema, llama.cpp's json_schema)
    ebnf,         // `text` is a GBNF grammar whose start rule is `root` (llama.cpp's grammar)
    tool_calls,   // one or more of `calls`, written in the model's tool-call format
  };

  /// One function call as the model's format writes it: `begin`, then JSON arguments matching
  /// `schema` (a JSON schema as text; "{}" accepts any object), then `end`. For Hermes-style
  /// templates, begin = "<tool_call>\n{\"name\": \"f\", \"arguments\": " and end = "}\n</tool_call>".
  struct call {
    std::string begin;
    std::string schema;
    std::string end;
  };

  /// Text the model may write freely before the constrained part: a reasoning block, from
  /// `open` to `close` (e.g. "<think>" and "</think>"). Structured output applies to the answer.
  struct free_block {
    std::string open;
    std::string close;
  };

  kind type = kind::none;
  /// json_schema: the schema; ebnf: the grammar.
  std::string text;
  /// json_schema: OpenAI's `strict` (no properties beyond the schema's).
  bool strict = false;

  /// tool_calls: the calls allowed (any of them, at each position), written after `prefix`,
  /// separated by `separator` when `parallel`, and followed by `suffix`.
  std::vector<call> calls;
  std::string prefix;
  std::string separator;
  std::string suffix;
  bool parallel = false;
  /// tool_calls: when set, the calls are optional (tool_choice auto with strict tools): text is
  /// free until the model writes `trigger`, which must then begin one of `calls` (their `begin`
  /// starts with it); prefix and suffix are not used.
  std::string trigger;

  /// Reasoning the model may write before the constrained output.
  std::optional<free_block> reasoning;

  bool active() const noexcept { return type != kind::none; }
};

}  // namespace strata::sampling
