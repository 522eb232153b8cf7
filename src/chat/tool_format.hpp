#pragma once
// tool_format: how a model writes tool calls and reasoning, found once from its chat template
// (and its vocabulary's control tokens), so that the server can prompt with tools, parse what the
// model writes back, and constrain it when a call is required.
//
// Formats:
// - hermes:     `<tool_call>{"name": N, "arguments": {...}}</tool_call>`, one block per call
//               (Qwen 2.5/3, Hermes; also the fallback below).
// - llama3_json: `{"name": N, "parameters": {...}}` as the whole answer, possibly after
//               `<|python_tag|>` (Llama 3.1/3.2).
// - json_list:  a marker, then a JSON list of `{"name", "arguments"}` (Mistral's `[TOOL_CALLS]`,
//               Granite's `<|tool_call|>`).
// - qwen3_xml:  `<tool_call><function=N><parameter=p>v</parameter></function></tool_call>`
//               (Qwen3-Coder).
// - harmony:    gpt-oss channels: `<|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}<|call|>`;
//               the analysis channel is reasoning, the final channel the answer.
// A template that shows no tool format of its own (SmolLM2's, Gemma's, Phi's, SmolLM3's, the
// built-in ChatML) gets the fallback: the tools are described in a system message the server adds
// and the model is asked for Hermes blocks; assistant calls and tool results in the history are
// written into the messages' text the same way.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::chat {

enum class tool_syntax { hermes, llama3_json, json_list, qwen3_xml, harmony };

struct tool_format {
  tool_syntax syntax = tool_syntax::hermes;
  /// The template renders `tools` and tool history itself; false: the fallback.
  bool native = false;
  /// json_list: the marker before the list ("[TOOL_CALLS]" or "<|tool_call|>").
  std::string list_marker;
  /// A native template writes assistants' `tool_calls` itself; where it does not (Granite's), the
  /// server writes them into the message's content in the format.
  bool renders_calls = true;
  /// The template writes `<think>` blocks: they are reasoning.
  bool thinks = false;
  /// Call ids of 9 letters and digits (Mistral's templates refuse others); else "call_" + 24.
  bool short_ids = false;
  /// The template knows the `developer` role; otherwise developer messages are rendered as system
  /// (conversation.hpp).
  bool developer_role = false;
  /// Markup of this format that the vocabulary holds as control tokens: the detokenizer drops
  /// those, so the server hands their text to the parser itself.
  std::vector<std::string> control_markup;

  /// "hermes", "llama3_json", "json_list", "qwen3_xml" or "harmony", with " (fallback)".
  std::string describe() const;
};

/// Finds the format from a template's source ("" for none: the fallback). `is_control` says
/// whether the vocabulary holds a string as one control token (may be empty: none are).
tool_format detect_tool_format(std::string_view template_source,
                               const std::function<bool(std::string_view)>& is_control = {});

/// A fresh call id in the format's style.
std::string new_tool_call_id(const tool_format& f);

}  // namespace strata::chat
