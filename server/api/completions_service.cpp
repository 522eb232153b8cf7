#include "server/api/completions_service.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "server/api/on_pool.hpp"
#include "server/api/sse_reply.hpp"
#include "src/api/response_writer.hpp"
#include "server/api/sinks.hpp"
#include "src/api/stream_framing.hpp"
#include "src/api/tokenize_request.hpp"
#include "src/api/tool_fields.hpp"
#include "src/chat/conversation.hpp"
#include "src/chat/tool_messages.hpp"
#include "src/api/ws_envelope.hpp"

namespace strata::api {
namespace {

namespace json = boost::json;
namespace net = boost::asio;

/// The most bytes of text one token stands for: the longest piece of the vocabulary (special
/// tokens as their text, as a prompt may spell them), and at least 4 (one UTF-8 character, which
/// an unknown-token id may stand for whatever its piece reads). A text of B bytes has at least
/// B / this many tokens.
std::size_t longest_token_bytes(const tokenizer::tokenizer& tok) {
  std::size_t longest = 4;
  for (std::int32_t id = 0; id < tok.n_vocab(); ++id) longest = std::max(longest, tok.token_to_piece(id, true).size());
  return longest;
}

/// The reply that `f` makes on `pool`.
template <class F>
net::awaitable<io::handler_result> reply_from_pool(net::thread_pool& pool, F f) {
  co_return co_await on_pool(pool, std::move(f));
}

/// Compiles the request's grammar (from the engine's cache when it was seen before); one that
/// does not compile is a 400 naming the member it came from.
std::optional<api_error> compile_grammar(const engine::engine& e, generation_request& r) {
  const auto& spec = r.settings.grammar;
  if (!spec.active()) return std::nullopt;
  auto g = e.grammars().compile(spec);
  if (g) {
    r.settings.compiled_grammar = std::move(g.grammar);
    return std::nullopt;
  }
  const bool tools = spec.type == sampling::grammar_spec::kind::tool_calls;
  std::string field = r.grammar_field.empty() ? (tools ? "tools" : "response_format") : r.grammar_field;
  if (tools && g.error.call >= 0) field = "tools[" + std::to_string(g.error.call) + "].function.parameters";
  const char* what = spec.type == sampling::grammar_spec::kind::ebnf ? "grammar" : tools ? "function parameters schema" : "JSON schema";
  return invalid_request(field, std::string("the ") + what + " cannot be used for constrained decoding: " + g.error.message, "invalid_grammar");
}

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Per-socket bookkeeping of a WebSocket: the requests still running, by the client's id and by
/// their first scheduler id, and those being tokenized on the pool (true once cancelled meanwhile:
/// they are never submitted). Touched only on the connection's strand (every websocket_accept
/// callback runs there, and the pool's work comes back there), so nothing guards it.
struct ws_state {
  std::unordered_map<std::string, std::vector<std::uint64_t>> running;
  std::unordered_map<std::uint64_t, std::string> keys;
  std::unordered_map<std::string, bool> preparing;
  bool paused = false;
};

}  // namespace

bool prepare_on_pool(std::string_view body) {
  if (body.size() >= k_inline_bytes) return true;
  for (std::string_view key : {"\"response_format\"", "\"grammar\"", "\"json_schema\"", "\"tool_choice\"", "\"strict\""})
    if (body.find(key) != std::string_view::npos) return true;
  return false;
}

io::http_response error_response(unsigned version, const api_error& e, std::string body) {
  auto res = io::make_json(version, static_cast<io::http::status>(e.status), body.empty() ? schema::write_error(e) : std::move(body));
  if (e.status == 429) res.set(io::http::field::retry_after, "1");
  return res;
}

completions_service::completions_service(const engine::engine& e, hub_address hub) : engine_(e), hub_(std::move(hub)) {
  max_prompt_bytes_ = static_cast<std::size_t>(engine_.max_context()) * longest_token_bytes(engine_.tok());
  tool_format_ = format_of(engine_.has_own_template() ? engine_.tok().chat_template() : std::string());
  spdlog::info("tool calls: {}", tool_format_.describe());
}

completions_service::~completions_service() { pool_.join(); }

chat::tool_format completions_service::format_of(std::string_view source) const {
  const auto& tok = engine_.tok();
  return chat::detect_tool_format(source, [&tok](std::string_view s) {
    const auto id = tok.find(s);
    return id >= 0 && tok.type(id) == tokenizer::token_type::control;
  });
}

response_meta completions_service::meta_of(const generation_request& r, std::string id, const std::vector<std::uint64_t>& ids) const {
  response_meta meta{r.chat, {std::move(id), now_seconds(), engine_.model_id(), {}}, static_cast<int>(ids.size()), r.logprobs,
                     r.include_usage, engine_.tok_ptr(), ids, engine_.scheduler(), r.output};
  meta.per_prompt = r.n;
  meta.token_ids = r.token_ids;
  if (!r.echo) return meta;
  // Each prompt's text, decoded where it was given as ids.
  if (!r.prompt_texts.empty()) {
    meta.echo = r.prompt_texts;
    return meta;
  }
  meta.echo.push_back(engine_.tok().decode(r.prompt_tokens));
  for (const auto& p : r.more_prompts) meta.echo.push_back(engine_.tok().decode(p));
  return meta;
}

std::vector<std::uint64_t> completions_service::new_ids(int n) {
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(next_id_.fetch_add(1));
  return ids;
}

std::optional<api_error> completions_service::prepare(generation_request& r, std::string_view key_salt) {
  const auto& tok = engine_.tok();
  if (!r.model.empty() && !engine_.serves(r.model))
    return api_error{404, "The model '" + r.model + "' does not exist; this server serves '" + engine_.model_id() + "'",
                     "invalid_request_error", "model", "model_not_found"};
  r.settings.cache_salt = kv::make_cache_salt(key_salt, r.cache_salt);
  const int bits = r.kv_bits != 0 ? r.kv_bits : engine_.default_kv_bits();
  if (!engine_.supports_kv_bits(bits))
    return invalid_request("kv_bits", "kv_bits " + std::to_string(bits) + ": " + engine_.kv_bits_problem(bits) + "; use 16", "unsupported_kv_bits");
  r.settings.kv_format = *kv::kv_format_from_bits(bits);
  // Checked before tokenizing, which takes about a second per few MB: a prompt too long in bytes
  // cannot fit in the context whatever its tokens.
  auto too_many_bytes = [&](std::size_t bytes) -> std::optional<api_error> {
    if (bytes <= max_prompt_bytes_) return std::nullopt;
    return invalid_request(r.chat ? "messages" : "prompt",
                           "the prompt is " + std::to_string(bytes) + " bytes; this server's context of " +
                               std::to_string(engine_.max_context()) + " tokens holds at most " +
                               std::to_string(max_prompt_bytes_) + " bytes of text",
                           "context_length_exceeded");
  };
  if (r.chat) {
    std::string text;
    if (auto e = render_chat(r, text)) return e;
    if (auto e = too_many_bytes(text.size())) return e;
    r.prompt_tokens = tok.encode(text, false, true);
    if (tok.add_bos() && tok.bos_id() >= 0 && (r.prompt_tokens.empty() || r.prompt_tokens[0] != tok.bos_id()))
      r.prompt_tokens.insert(r.prompt_tokens.begin(), tok.bos_id());
  } else if (!r.prompt_texts.empty()) {
    for (std::size_t i = 0; i < r.prompt_texts.size(); ++i) {
      if (auto e = too_many_bytes(r.prompt_texts[i].size())) return e;
      auto ids = tok.encode(r.prompt_texts[i], true, true);
      if (ids.empty()) return invalid_request("prompt", "prompt " + std::to_string(i) + " is empty");
      if (i == 0) r.prompt_tokens = std::move(ids);
      else r.more_prompts.push_back(std::move(ids));
    }
  }
  if (r.prompt_tokens.empty()) return invalid_request("prompt", "the prompt is empty");
  // The longest prompt bounds the completion.
  const std::vector<std::int32_t>* longest = &r.prompt_tokens;
  for (const auto& p : r.more_prompts)
    if (p.size() > longest->size()) longest = &p;
  auto outside_vocabulary = [&](const std::vector<std::int32_t>& p) -> std::optional<api_error> {
    for (auto t : p)
      if (t >= tok.n_vocab()) return invalid_request("prompt", "prompt token id " + std::to_string(t) + " is outside the vocabulary");
    return std::nullopt;
  };
  if (!r.chat) {
    if (auto e = outside_vocabulary(r.prompt_tokens)) return e;
    for (const auto& p : r.more_prompts)
      if (auto e = outside_vocabulary(p)) return e;
  }
  for (const auto& [id, b] : r.settings.sampling.logit_bias)
    if (id >= tok.n_vocab()) return invalid_request("logit_bias", "logit_bias token id " + std::to_string(id) + " is outside the vocabulary");
  const auto n_prompt = static_cast<std::int32_t>(longest->size());
  if (n_prompt >= engine_.max_context())
    return invalid_request(r.chat ? "messages" : "prompt",
                           "the prompt has " + std::to_string(n_prompt) + " tokens; this server's context is " +
                               std::to_string(engine_.max_context()),
                           "context_length_exceeded");
  const std::int64_t room = engine_.max_context() - n_prompt;
  // A limit the context cannot hold is refused, as OpenAI does, rather than cut short in silence.
  if (r.max_tokens && *r.max_tokens > room) {
    const char* part = r.chat ? "messages" : "prompt";
    return invalid_request(r.max_tokens_key,
                           "This model's maximum context length is " + std::to_string(engine_.max_context()) +
                               " tokens. However, you requested " + std::to_string(n_prompt + *r.max_tokens) + " tokens (" +
                               std::to_string(n_prompt) + " in the " + part + ", " + std::to_string(*r.max_tokens) +
                               " in the completion). Please reduce the length of the " + part + " or the completion.",
                           "context_length_exceeded");
  }
  r.settings.max_tokens = static_cast<std::int32_t>(r.max_tokens ? *r.max_tokens : room);
  return compile_grammar(engine_, r);
}

namespace {

/// Whether `prompt` ends inside a `<think>` block (the template opened it for the model).
bool ends_in_open_think(std::string_view prompt) {
  const auto open = prompt.rfind("<think>");
  return open != std::string_view::npos && prompt.find("</think>", open) == std::string_view::npos;
}

/// Whether `prompt` ends with a closed `<think>` block (the template turned thinking off).
bool ends_in_closed_think(std::string_view prompt) {
  const auto end = prompt.find_last_not_of(" \t\r\n");
  return end != std::string_view::npos && prompt.substr(0, end + 1).ends_with("</think>");
}

}  // namespace

std::optional<api_error> completions_service::render_chat(generation_request& r, std::string& text) const {
  // A request's own template is parsed per request, with the model's template's limits.
  const chat::chat_template* tmpl = &engine_.chat();
  chat::tool_format format = tool_format_;
  std::optional<chat::chat_template> own;
  if (!r.chat_template.empty()) {
    auto parsed = chat::chat_template::parse(r.chat_template);
    if (!parsed) return invalid_request("chat_template", "chat_template does not parse: " + parsed.err().message, "template_error");
    own.emplace(std::move(*parsed));
    own->set_limits(engine_.chat().limits());
    tmpl = &*own;
    format = format_of(r.chat_template);
  }
  // A last assistant message is continued unless the client asks for a generation prompt.
  const bool prefill = chat::ends_with_prefill(r.messages);
  const bool continued = r.continue_final_message.value_or(prefill && !r.add_generation_prompt.value_or(false));
  if (continued && !prefill)
    return invalid_request("continue_final_message", "continue_final_message needs a last assistant message with text content and no tool calls");
  if (continued && r.add_generation_prompt.value_or(false))
    return invalid_request("add_generation_prompt", "add_generation_prompt and continue_final_message cannot both be true");
  const bool none = r.tool_choice.is_string() && r.tool_choice.as_string() == "none";
  const bool offered = !none && r.tools.is_array() && !r.tools.as_array().empty();
  auto rendered = chat::render_with_tools(*tmpl, format, r.messages, offered ? r.tools : json::value(), r.template_kwargs, engine_.bos_text(),
                                          engine_.eos_text(), !continued && r.add_generation_prompt.value_or(true));
  if (!rendered)
    return invalid_request(own ? "chat_template" : "messages", "chat template error: " + rendered.err().message, "template_error");
  text = std::move(*rendered);
  if (continued) {
    auto cut = chat::continue_final_message(std::move(text), r.messages.back().as_object().at("content").as_string());
    if (!cut) return invalid_request("messages", cut.err().message, "template_error");
    text = std::move(*cut);
  }
  chat::parser_options o;
  o.format = format;
  o.parse_calls = offered;
  o.starts_in_reasoning = format.thinks && ends_in_open_think(text);
  if (offered) o.tools = r.tools;
  std::optional<sampling::grammar_spec::free_block> reasoning;
  if (o.starts_in_reasoning) reasoning = sampling::grammar_spec::free_block{"", "</think>"};
  else if (format.thinks && !ends_in_closed_think(text)) reasoning = sampling::grammar_spec::free_block{"<think>", "</think>"};
  if (offered) {
    auto g = schema::forced_tool_grammar(format, r.tools, r.tool_choice, r.parallel_tool_calls, std::move(reasoning));
    if (g.active()) r.settings.grammar = std::move(g);
  }
  if (offered || format.thinks || format.syntax == chat::tool_syntax::harmony) r.output = std::move(o);
  return std::nullopt;
}

std::vector<std::uint64_t> completions_service::submit(generation_request& r, std::unique_ptr<stream_sink> sink, std::vector<std::uint64_t> ids) {
  hub_.tell(open_stream{ids, std::move(sink)});
  const auto n = static_cast<std::size_t>(r.n);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::size_t p = i / n;  // the prompt: n choices each, in order
    const auto& prompt = p == 0 ? r.prompt_tokens : r.more_prompts[p - 1];
    sched::generation_settings g = r.settings;
    // Each choice draws its own tokens: consecutive seeds.
    g.sampling.seed = r.settings.sampling.seed + i;
    if (!r.max_tokens) g.max_tokens = engine_.max_context() - static_cast<std::int32_t>(prompt.size());
    // The other choices of a prompt reuse the KV its first choice computes.
    const std::uint64_t after = i % n == 0 ? 0 : ids[p * n];
    engine_.scheduler().tell(sched::submit{ids[i], prompt, std::move(g), hub_, after});
  }
  return ids;
}

io::handler_result completions_service::generate(io::http_request& req, const io::request_context& ctx, bool chat) {
  const unsigned version = req.version();
  if (prepare_on_pool(req.body())) {
    auto body = std::make_shared<std::string>(std::move(req.body()));
    return io::async_reply{[this, body, chat, version, ctx] { return prepare_off_thread(body, chat, version, ctx); }};
  }
  generation_request r;
  if (auto e = parse_generation_request(req.body(), chat, r)) return error_response(version, *e);
  if (auto e = prepare(r, ctx.key_salt)) return error_response(version, *e);
  return start(r, version, ctx);
}

net::awaitable<io::handler_result> completions_service::prepare_off_thread(std::shared_ptr<std::string> body, bool chat, unsigned version,
                                                                           io::request_context ctx) {
  auto r = std::make_shared<generation_request>();
  auto work = [this, body, chat, r, salt = ctx.key_salt]() -> std::optional<api_error> {
    if (auto e = parse_generation_request(*body, chat, *r)) return e;
    return prepare(*r, salt);
  };
  auto e = co_await on_pool(pool_, std::move(work));
  if (e) co_return error_response(version, *e);
  co_return start(*r, version, ctx);
}

io::handler_result completions_service::start(generation_request& r, unsigned version, const io::request_context& ctx) {
  auto ids = new_ids(choices_of(r));
  response_meta meta = meta_of(r, (r.chat ? "chatcmpl-" : "cmpl-") + ctx.request_id, ids);
  spdlog::debug("[{}] {} prompt tokens, max_tokens {}, n {}, stream {}", ctx.request_id, r.prompt_tokens.size(), r.settings.max_tokens, r.n, r.stream);
  return reply(r, ids, version, ctx, [&](io::reply_address out, bool streamed) -> std::unique_ptr<stream_sink> {
    if (!streamed) return std::make_unique<full_sink>(meta, std::move(out));
    return std::make_unique<chunk_sink>(meta, std::move(out), chunk_sink::framing::sse);
  });
}

io::handler_result completions_service::reply(generation_request& r, const std::vector<std::uint64_t>& ids, unsigned version,
                                              const io::request_context& ctx, const sink_maker& make_sink) {
  // Whether the request is admitted is the scheduler's answer alone: the reply waits for it.
  auto queue = io::reply_queue::create(ctx.executor);
  queue->on_cancel([scheduler = engine_.scheduler(), ids] {
    for (auto id : ids) scheduler.tell(sched::cancel{id});
  });
  if (!r.stream) {
    submit(r, make_sink(queue->address(), false), ids);
    return io::deferred_reply{queue};
  }
  queue->on_pressure([scheduler = engine_.scheduler(), ids](bool paused) {
    for (auto id : ids) scheduler.tell(sched::set_paused{id, paused});
  });
  submit(r, make_sink(queue->address(), true), ids);
  return sse_reply(version, std::move(queue));
}

io::handler_result completions_service::chat(io::http_request& req, const io::request_context& ctx) { return generate(req, ctx, true); }
io::handler_result completions_service::completion(io::http_request& req, const io::request_context& ctx) { return generate(req, ctx, false); }

io::handler_result completions_service::tokenize(io::http_request& req, const io::request_context&) {
  auto body = std::make_shared<std::string>(std::move(req.body()));
  auto answer = [this, body, version = req.version()] {
    auto r = schema::parse_tokenize_request(*body);
    if (!r) return error_response(version, r.err());
    const auto& tok = engine_.tok();
    auto ids = tok.encode(r->content, r->add_special, r->parse_special);
    if (!r->with_pieces) return io::make_json(version, io::http::status::ok, schema::write_tokenize(ids));
    std::vector<std::string> pieces;
    pieces.reserve(ids.size());
    for (auto id : ids) pieces.push_back(tok.token_to_piece(id, true));
    return io::make_json(version, io::http::status::ok, schema::write_tokenize_pieces(ids, pieces));
  };
  if (body->size() < k_inline_bytes) return answer();
  return io::async_reply{[this, answer] { return reply_from_pool(pool_, answer); }};
}

io::handler_result completions_service::detokenize(io::http_request& req, const io::request_context&) {
  auto r = schema::parse_detokenize_request(req.body());
  if (!r) return error_response(req.version(), r.err());
  for (auto t : r->tokens)
    if (t >= engine_.tok().n_vocab())
      return error_response(req.version(), invalid_request("tokens", "token id " + std::to_string(t) + " is outside the vocabulary"));
  return io::make_json(req.version(), io::http::status::ok, schema::write_detokenize(engine_.tok().decode(r->tokens)));
}

io::handler_result completions_service::websocket(io::http_request&, const io::request_context& ctx) {
  auto state = std::make_shared<ws_state>();
  auto scheduler = engine_.scheduler();
  // Submits a prepared request (on the connection's strand).
  auto start = [this, state, scheduler, request_id = ctx.request_id](generation_request& r, const std::string& id_json,
                                                                      io::reply_address outbox) {
    auto ids = new_ids(choices_of(r));
    // A request id the client reuses replaces the entry; the older request still ends by its own.
    state->running[id_json] = ids;
    state->keys[ids.front()] = id_json;
    response_meta meta = meta_of(r, (r.chat ? "chatcmpl-" : "cmpl-") + request_id + "-" + std::to_string(ids[0]), ids);
    submit(r, std::make_unique<chunk_sink>(meta, std::move(outbox), chunk_sink::framing::websocket, id_json), ids);
    // A socket whose outbox is full pauses every stream it runs, new ones too.
    if (state->paused)
      for (auto id : ids) scheduler.tell(sched::set_paused{id, true});
  };
  io::websocket_accept accept;
  accept.on_message = [this, state, scheduler, start, key_salt = ctx.key_salt, strand = ctx.executor](io::websocket_message message) {
    schema::ws_envelope env;
    auto fail = [&](const api_error& e) { message.outbox.send({schema::ws_error_frame(env.id_json, e)}); };
    if (auto e = schema::parse_ws_envelope(message.text, env)) return fail(*e);
    if (env.type == schema::ws_envelope::kind::cancel) {
      if (auto it = state->preparing.find(env.id_json); it != state->preparing.end()) it->second = true;
      if (auto it = state->running.find(env.id_json); it != state->running.end())
        for (auto sid : it->second) scheduler.tell(sched::cancel{sid});
      return;
    }
    const bool chat = env.endpoint == schema::ws_envelope::target::chat_completions;
    if (!prepare_on_pool(message.text)) {
      generation_request r;
      if (auto e = parse_generation_request(env.body, chat, r)) return fail(*e);
      if (auto e = prepare(r, key_salt)) return fail(*e);
      return start(r, env.id_json, std::move(message.outbox));
    }
    // A large request is parsed, rendered and tokenized on the pool; back on the connection's
    // strand it is submitted, unless it was cancelled (or the socket closed) meanwhile: then it
    // only gets its done frame.
    state->preparing[env.id_json] = false;
    net::post(pool_, [this, state, start, chat, strand, body = std::move(env.body), key_salt, outbox = std::move(message.outbox),
                      id = env.id_json]() mutable {
      auto r = std::make_shared<generation_request>();
      auto e = parse_generation_request(body, chat, *r);
      if (!e) e = prepare(*r, key_salt);
      net::post(strand, [state, start, r, e = std::move(e), outbox = std::move(outbox), id = std::move(id)]() mutable {
        bool cancelled = true;  // the socket closed: its state is gone
        if (auto it = state->preparing.find(id); it != state->preparing.end()) {
          cancelled = it->second;
          state->preparing.erase(it);
        }
        if (cancelled || e) {
          outbox.send({cancelled ? schema::ws_done_frame(id) : schema::ws_error_frame(id, *e)});
          return;
        }
        start(*r, id, std::move(outbox));
      });
    });
  };
  accept.on_ended = [state](std::uint64_t first) {
    auto key = state->keys.find(first);
    if (key == state->keys.end()) return;
    // A later request may have reused the client's id: forget only this one.
    if (auto it = state->running.find(key->second); it != state->running.end() && it->second.front() == first)
      state->running.erase(it);
    state->keys.erase(key);
  };
  accept.on_pressure = [state, scheduler](bool paused) {
    state->paused = paused;
    for (auto& [key, ids] : state->running)
      for (auto id : ids) scheduler.tell(sched::set_paused{id, paused});
  };
  accept.on_close = [state, scheduler] {
    for (auto& [key, ids] : state->running)
      for (auto sid : ids) scheduler.tell(sched::cancel{sid});
    state->running.clear();
    state->keys.clear();
    state->preparing.clear();
  };
  accept.stall_timeout = engine_.config().limits.ws_stall_timeout;
  return accept;
}

}  // namespace strata::api
