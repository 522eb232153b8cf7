#include "src/api/response_writer.hpp"

#include <cmath>

#include "src/api/json_writer.hpp"
#include "src/common/utf8.hpp"

namespace strata::api::schema {
namespace {

constexpr double impossible_logprob = -9999.0;

double finite_logprob(double x) { return std::isfinite(x) ? x : impossible_logprob; }

void write_head(json_writer& w, const response_head& head, std::string_view object) {
  w.member("id", head.id).member("object", object).key("created").number(head.created).member("model", head.model);
}

void write_fingerprint(json_writer& w, const response_head& head) {
  w.key("system_fingerprint");
  if (head.system_fingerprint.empty()) w.null();
  else w.string(head.system_fingerprint);
}

void write_usage(json_writer& w, const usage_counts& u) {
  w.key("usage").begin_object();
  w.key("prompt_tokens").number(u.prompt_tokens);
  w.key("completion_tokens").number(u.completion_tokens);
  w.key("total_tokens").number(u.prompt_tokens + u.completion_tokens);
  w.key("prompt_tokens_details").begin_object().key("cached_tokens").number(u.cached_tokens).end_object();
  // strata's own: where the cached tokens came from, per tier.
  w.key("strata_cached_tokens").begin_object();
  w.key("ram").number(u.cached_tokens - u.ssd_cached_tokens - u.host_cached_tokens).key("ssd").number(u.ssd_cached_tokens);
  w.key("host").number(u.host_cached_tokens);
  w.end_object();
  w.end_object();
}

void write_bytes(json_writer& w, std::string_view token) {
  w.key("bytes").begin_array();
  for (char c : token) w.number(static_cast<std::int64_t>(static_cast<unsigned char>(c)));
  w.end_array();
}

// Chat's `{"content":[{token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]}], "refusal": null}`.
void write_chat_logprobs(json_writer& w, const std::vector<token_logprob>& lps) {
  w.begin_object().key("content").begin_array();
  for (const auto& lp : lps) {
    w.begin_object().member("token", logprob_token_text(lp.token)).key("logprob").number(finite_logprob(lp.logprob));
    write_bytes(w, lp.token);
    w.key("top_logprobs").begin_array();
    for (const auto& alt : lp.top) {
      w.begin_object().member("token", logprob_token_text(alt.token)).key("logprob").number(finite_logprob(alt.logprob));
      write_bytes(w, alt.token);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_array().key("refusal").null().end_object();
}

// Completions' `{"tokens":[...], "token_logprobs":[...], "top_logprobs":[{token: logprob}], "text_offset":[...]}`.
void write_text_logprobs(json_writer& w, const std::vector<token_logprob>& lps, std::int64_t offset) {
  w.begin_object().key("tokens").begin_array();
  for (const auto& lp : lps) w.string(logprob_token_text(lp.token));
  w.end_array().key("token_logprobs").begin_array();
  for (const auto& lp : lps) w.number(finite_logprob(lp.logprob));
  w.end_array().key("top_logprobs").begin_array();
  for (const auto& lp : lps) {
    // An object keyed by token: two alternatives spelled alike keep the first (the likelier).
    w.begin_object();
    std::vector<std::string> seen;
    for (const auto& alt : lp.top) {
      std::string name = logprob_token_text(alt.token);
      bool dup = false;
      for (const auto& s : seen) dup = dup || s == name;
      if (dup) continue;
      w.key(name).number(finite_logprob(alt.logprob));
      seen.push_back(std::move(name));
    }
    w.end_object();
  }
  w.end_array().key("text_offset").begin_array();
  for (const auto& lp : lps) {
    w.number(offset);
    offset += static_cast<std::int64_t>(lp.token.size());
  }
  w.end_array().end_object();
}

// Opens a chat chunk up to the start of its single choice's delta.
void begin_chat_chunk(json_writer& w, const response_head& head, int index) {
  w.begin_object();
  write_head(w, head, "chat.completion.chunk");
  write_fingerprint(w, head);
  w.key("choices").begin_array().begin_object().key("index").number(std::int64_t{index}).key("delta").begin_object();
}

// Closes the choices of a whole (non-stream) completion, adds its usage and fingerprint, and
// returns it.
std::string finish_completion(json_writer& w, const response_head& head, const usage_counts& usage) {
  w.end_array();
  write_usage(w, usage);
  write_fingerprint(w, head);
  w.end_object();
  return w.take();
}

// Writes the choice's finish_reason, closes the choice and the chunk (with "usage": null where the
// client asked for usage, which then comes in a chunk of its own), and returns the chunk.
std::string finish_chunk(json_writer& w, std::optional<std::string_view> finish_reason, bool include_usage) {
  w.key("finish_reason");
  if (finish_reason) w.string(*finish_reason);
  else w.null();
  w.end_object().end_array();
  if (include_usage) w.key("usage").null();
  w.end_object();
  return w.take();
}

// Closes the choice started by begin_chat_chunk, then the chunk.
std::string end_chat_chunk(json_writer& w, const std::vector<token_logprob>* logprobs,
                           std::optional<std::string_view> finish_reason, bool include_usage) {
  w.key("logprobs");
  if (logprobs) write_chat_logprobs(w, *logprobs);
  else w.null();
  return finish_chunk(w, finish_reason, include_usage);
}

std::string usage_chunk(const response_head& head, const usage_counts& usage, std::string_view object) {
  json_writer w;
  w.begin_object();
  write_head(w, head, object);
  write_fingerprint(w, head);
  w.key("choices").begin_array().end_array();
  write_usage(w, usage);
  w.end_object();
  return w.take();
}

}  // namespace

std::string logprob_token_text(std::string_view token) {
  if (utf8::is_valid(token)) return std::string(token);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "bytes:";
  for (char c : token) {
    auto b = static_cast<unsigned char>(c);
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

std::string write_chat_completion(const response_head& head, const std::vector<chat_choice>& choices, const usage_counts& usage) {
  json_writer w;
  w.begin_object();
  write_head(w, head, "chat.completion");
  w.key("choices").begin_array();
  for (const auto& c : choices) {
    w.begin_object().key("index").number(std::int64_t{c.index});
    w.key("message").begin_object().member("role", "assistant").key("content");
    if (c.content.empty() && !c.tool_calls.empty()) w.null();
    else w.string(c.content);
    w.key("refusal").null();
    if (!c.reasoning.empty()) w.member("reasoning_content", c.reasoning);
    if (!c.tool_calls.empty()) {
      w.key("tool_calls").begin_array();
      for (const auto& call : c.tool_calls) {
        w.begin_object().member("id", call.id).member("type", "function").key("function").begin_object();
        w.member("name", call.name).member("arguments", call.arguments).end_object().end_object();
      }
      w.end_array();
    }
    w.end_object();
    w.key("logprobs");
    if (c.has_logprobs) write_chat_logprobs(w, c.logprobs);
    else w.null();
    w.member("finish_reason", c.finish_reason).end_object();
  }
  return finish_completion(w, head, usage);
}

std::string write_chat_role_chunk(const response_head& head, int index, bool include_usage) {
  json_writer w;
  begin_chat_chunk(w, head, index);
  w.member("role", "assistant").member("content", "").end_object();
  return end_chat_chunk(w, nullptr, std::nullopt, include_usage);
}

std::string write_chat_content_chunk(const response_head& head, int index, std::string_view content,
                                     const std::vector<token_logprob>* logprobs, bool include_usage) {
  json_writer w;
  begin_chat_chunk(w, head, index);
  w.member("content", content).end_object();
  return end_chat_chunk(w, logprobs, std::nullopt, include_usage);
}

std::string write_chat_reasoning_chunk(const response_head& head, int index, std::string_view reasoning, bool include_usage) {
  json_writer w;
  begin_chat_chunk(w, head, index);
  w.member("reasoning_content", reasoning).end_object();
  return end_chat_chunk(w, nullptr, std::nullopt, include_usage);
}

std::string write_chat_tool_call_start_chunk(const response_head& head, int index, int call_index, const chat::tool_call& call,
                                             bool include_usage) {
  json_writer w;
  begin_chat_chunk(w, head, index);
  w.key("tool_calls").begin_array().begin_object().key("index").number(std::int64_t{call_index});
  w.member("id", call.id).member("type", "function").key("function").begin_object();
  w.member("name", call.name).member("arguments", "").end_object().end_object().end_array().end_object();
  return end_chat_chunk(w, nullptr, std::nullopt, include_usage);
}

std::string write_chat_tool_call_arguments_chunk(const response_head& head, int index, int call_index, std::string_view arguments,
                                                 bool include_usage) {
  json_writer w;
  begin_chat_chunk(w, head, index);
  w.key("tool_calls").begin_array().begin_object().key("index").number(std::int64_t{call_index});
  w.key("function").begin_object().member("arguments", arguments).end_object().end_object().end_array().end_object();
  return end_chat_chunk(w, nullptr, std::nullopt, include_usage);
}

std::string write_chat_finish_chunk(const response_head& head, int index, std::string_view finish_reason, bool include_usage) {
  json_writer w;
  begin_chat_chunk(w, head, index);
  w.end_object();
  return end_chat_chunk(w, nullptr, finish_reason, include_usage);
}

std::string write_chat_usage_chunk(const response_head& head, const usage_counts& usage) {
  return usage_chunk(head, usage, "chat.completion.chunk");
}

std::string write_text_completion(const response_head& head, const std::vector<text_choice>& choices, const usage_counts& usage) {
  json_writer w;
  w.begin_object();
  write_head(w, head, "text_completion");
  w.key("choices").begin_array();
  for (const auto& c : choices) {
    w.begin_object().member("text", c.text).key("index").number(std::int64_t{c.index}).key("logprobs");
    if (c.has_logprobs) write_text_logprobs(w, c.logprobs, c.text_offset_start);
    else w.null();
    if (c.token_ids) {
      w.key("token_ids").begin_array();
      for (auto id : *c.token_ids) w.number(std::int64_t{id});
      w.end_array();
    }
    w.member("finish_reason", c.finish_reason).end_object();
  }
  return finish_completion(w, head, usage);
}

std::string write_text_chunk(const response_head& head, int index, std::string_view text, const std::vector<token_logprob>* logprobs,
                             std::int64_t text_offset_start, std::optional<std::string_view> finish_reason, bool include_usage) {
  json_writer w;
  w.begin_object();
  write_head(w, head, "text_completion");
  write_fingerprint(w, head);
  w.key("choices").begin_array().begin_object().member("text", text).key("index").number(std::int64_t{index});
  w.key("logprobs");
  if (logprobs) write_text_logprobs(w, *logprobs, text_offset_start);
  else w.null();
  return finish_chunk(w, finish_reason, include_usage);
}

std::string write_text_usage_chunk(const response_head& head, const usage_counts& usage) {
  return usage_chunk(head, usage, "text_completion");
}

std::string write_models(const std::vector<model_entry>& models) {
  json_writer w;
  w.begin_object().member("object", "list").key("data").begin_array();
  for (const auto& m : models)
    w.begin_object().member("id", m.id).member("object", "model").key("created").number(m.created).member("owned_by", "strata").end_object();
  w.end_array().end_object();
  return w.take();
}

std::string write_tokenize(const std::vector<std::int32_t>& ids) {
  json_writer w;
  w.begin_object().key("tokens").begin_array();
  for (auto id : ids) w.number(std::int64_t{id});
  w.end_array().end_object();
  return w.take();
}

std::string write_tokenize_pieces(const std::vector<std::int32_t>& ids, const std::vector<std::string>& pieces) {
  json_writer w;
  w.begin_object().key("tokens").begin_array();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    w.begin_object().key("id").number(std::int64_t{ids[i]}).key("piece");
    std::string_view piece = i < pieces.size() ? std::string_view(pieces[i]) : std::string_view();
    if (utf8::is_valid(piece)) {
      w.string(piece);
    } else {
      w.begin_array();
      for (char c : piece) w.number(static_cast<std::int64_t>(static_cast<unsigned char>(c)));
      w.end_array();
    }
    w.end_object();
  }
  w.end_array().end_object();
  return w.take();
}

std::string write_detokenize(std::string_view content) {
  json_writer w;
  w.begin_object().member("content", content).end_object();
  return w.take();
}

std::string write_error(const api_error& e) {
  json_writer w;
  w.begin_object().key("error").begin_object().member("message", e.message).member("type", e.type);
  w.key("param");
  if (e.param.empty()) w.null();
  else w.string(e.param);
  w.key("code");
  if (e.code.empty()) w.null();
  else w.string(e.code);
  w.end_object().end_object();
  return w.take();
}

}  // namespace strata::api::schema
