#pragma once
// The JSON bodies strata answers with, written byte for byte in the shapes of OpenAI's API (as
// typed by the openai-node SDK): chat.completion, chat.completion.chunk, text_completion and its
// chunks, /v1/models, /tokenize, /detokenize and errors.
//
// Choices where OpenAI's responses and the SDK types leave room:
// - `system_fingerprint` is always present: the fingerprint, or null when none is set.
// - A chat message carries `"refusal": null` (required in the SDK's ChatCompletionMessage);
//   stream deltas do not (optional there).
// - Logprobs of -infinity are written as -9999.0, the value OpenAI uses for impossible tokens.
// - A token that is not valid UTF-8 on its own is named "bytes:\xNN..." (the spelling OpenAI
//   uses); its `bytes` carry the exact bytes.
// - Completions' `text_offset` counts bytes from text_offset_start.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/api/api_error.hpp"
#include "src/chat/tool_parser.hpp"

namespace strata::api::schema {

/// The fields every response and chunk of one request repeats.
struct response_head {
  /// "chatcmpl-..." or "cmpl-...".
  std::string id;
  /// Unix seconds.
  std::int64_t created = 0;
  std::string model;
  /// Empty: written as null.
  std::string system_fingerprint;
};

/// Token counts of one request (all choices together).
struct usage_counts {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  /// Prompt tokens served from the prefix cache.
  std::int64_t cached_tokens = 0;
  /// Of those, the tokens restored from the SSD tier, and from the host tier (the rest came from
  /// the KV pool).
  std::int64_t ssd_cached_tokens = 0;
  std::int64_t host_cached_tokens = 0;
};

/// One alternative at a position: the token's bytes and its log-probability.
struct logprob_alternative {
  std::string token;
  double logprob = 0.0;
};

/// The chosen token at one position, its log-probability and the most likely alternatives.
struct token_logprob {
  std::string token;
  double logprob = 0.0;
  std::vector<logprob_alternative> top;
};

/// One finished chat choice.
struct chat_choice {
  int index = 0;
  /// Written as null when empty and the choice made tool calls.
  std::string content;
  /// `reasoning_content`, written only when not empty.
  std::string reasoning;
  /// `tool_calls`, written only when not empty.
  std::vector<chat::tool_call> tool_calls;
  /// Written only when `has_logprobs`; otherwise `"logprobs": null`.
  bool has_logprobs = false;
  std::vector<token_logprob> logprobs;
  /// "stop", "length", "tool_calls" or "content_filter".
  std::string finish_reason = "stop";
};

/// One finished text completion choice.
struct text_choice {
  int index = 0;
  std::string text;
  bool has_logprobs = false;
  std::vector<token_logprob> logprobs;
  /// The offset of the first token in `text_offset` (the prompt's length when it is echoed).
  std::int64_t text_offset_start = 0;
  std::string finish_reason = "stop";
  /// The ids of the tokens it generated, written as `token_ids` when given.
  std::optional<std::vector<std::int32_t>> token_ids;
};

/// One model of /v1/models.
struct model_entry {
  std::string id;
  std::int64_t created = 0;
};

/// A non-streamed `chat.completion`.
std::string write_chat_completion(const response_head& head, const std::vector<chat_choice>& choices, const usage_counts& usage);

/// The first chunk of a chat choice: `delta: {"role":"assistant","content":""}`.
std::string write_chat_role_chunk(const response_head& head, int index, bool include_usage);
/// A chunk with generated text, and its tokens' logprobs when `logprobs` is given.
std::string write_chat_content_chunk(const response_head& head, int index, std::string_view content,
                                     const std::vector<token_logprob>* logprobs, bool include_usage);
/// A chunk of reasoning: `delta: {"reasoning_content": text}`.
std::string write_chat_reasoning_chunk(const response_head& head, int index, std::string_view reasoning, bool include_usage);
/// The first chunk of a tool call, as OpenAI streams it:
/// `delta: {"tool_calls":[{"index","id","type":"function","function":{"name","arguments":""}}]}`.
std::string write_chat_tool_call_start_chunk(const response_head& head, int index, int call_index, const chat::tool_call& call,
                                             bool include_usage);
/// A fragment of a tool call's arguments: `delta: {"tool_calls":[{"index","function":{"arguments"}}]}`.
std::string write_chat_tool_call_arguments_chunk(const response_head& head, int index, int call_index, std::string_view arguments,
                                                 bool include_usage);
/// The last chunk of a chat choice: an empty delta and the finish reason.
std::string write_chat_finish_chunk(const response_head& head, int index, std::string_view finish_reason, bool include_usage);
/// The chunk after all choices finish when include_usage is on: `"choices": []` and the usage.
std::string write_chat_usage_chunk(const response_head& head, const usage_counts& usage);

/// A non-streamed `text_completion`.
std::string write_text_completion(const response_head& head, const std::vector<text_choice>& choices, const usage_counts& usage);
/// A streamed `text_completion` chunk: text (possibly empty), logprobs when given, and the finish
/// reason on the last chunk of a choice.
std::string write_text_chunk(const response_head& head, int index, std::string_view text, const std::vector<token_logprob>* logprobs,
                             std::int64_t text_offset_start, std::optional<std::string_view> finish_reason, bool include_usage);
/// The usage chunk of a completions stream: `"choices": []` and the usage.
std::string write_text_usage_chunk(const response_head& head, const usage_counts& usage);

/// `{"object":"list","data":[{"id","object":"model","created","owned_by":"strata"}]}`.
std::string write_models(const std::vector<model_entry>& models);

/// `{"tokens":[ids]}`.
std::string write_tokenize(const std::vector<std::int32_t>& ids);
/// `{"tokens":[{"id","piece"}]}`; a piece that is not valid UTF-8 is written as an array of its bytes.
std::string write_tokenize_pieces(const std::vector<std::int32_t>& ids, const std::vector<std::string>& pieces);
/// `{"content": text}`.
std::string write_detokenize(std::string_view content);

/// `{"error":{"message","type","param","code"}}` (empty param and code as null).
std::string write_error(const api_error& e);

/// How a token is named in logprobs: itself when valid UTF-8, else "bytes:\xNN...".
std::string logprob_token_text(std::string_view token);

}  // namespace strata::api::schema
