#include "src/api/generation_request.hpp"

#include <random>

#include "src/api/chat_request.hpp"
#include "src/api/completion_request.hpp"

namespace strata::api {
namespace {

void apply_sampling(const schema::sampling_params& p, generation_request& out) {
  auto& s = out.settings.sampling;
  s = p.sampler;
  s.seed = p.seed ? static_cast<std::uint64_t>(*p.seed) : fresh_seed();
  out.stream = p.stream;
  out.include_usage = p.include_usage;
  out.settings.stop = p.stop;
  out.settings.ignore_eos = p.ignore_eos;
  out.n = p.n;
  out.logprobs = p.sampler.logprobs;
  out.top_logprobs = p.sampler.top_logprobs;
  out.max_tokens = p.max_tokens;
  out.max_tokens_key = p.max_tokens_key;
  out.kv_bits = p.kv_bits;
  out.cache_salt = p.cache_salt;
  out.settings.grammar = p.grammar;
  out.grammar_field = p.grammar_field;
}

}  // namespace

std::uint64_t fresh_seed() {
  static thread_local std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

std::optional<api_error> parse_generation_request(std::string_view body, bool chat, generation_request& out) {
  out.chat = chat;
  if (chat) {
    auto r = schema::parse_chat_request(body);
    if (!r) return std::move(r).err();
    out.messages = std::move(r->messages_json);
    out.tools = std::move(r->tools);
    out.tool_choice = std::move(r->tool_choice);
    out.template_kwargs = std::move(r->template_kwargs);
    out.chat_template = std::move(r->chat_template);
    out.add_generation_prompt = r->add_generation_prompt;
    out.continue_final_message = r->continue_final_message;
    out.model = std::move(r->model);
    out.parallel_tool_calls = r->sampling.parallel_tool_calls;
    apply_sampling(r->sampling, out);
  } else {
    auto r = schema::parse_completion_request(body);
    if (!r) return std::move(r).err();
    out.model = std::move(r->model);
    out.prompt_texts = std::move(r->prompt_texts);
    out.echo = r->echo;
    out.token_ids = r->return_token_ids;
    for (auto& ids : r->prompt_tokens) {
      if (out.prompt_tokens.empty()) out.prompt_tokens = std::move(ids);
      else out.more_prompts.push_back(std::move(ids));
    }
    apply_sampling(r->sampling, out);
  }
  return std::nullopt;
}

}  // namespace strata::api
