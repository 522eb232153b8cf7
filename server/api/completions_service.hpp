#pragma once
// completions_service: the generating endpoints. It parses a request, renders the chat
// template, tokenizes, registers the request's sink with the stream hub and submits it to the
// scheduler; the sink turns the scheduler's events into SSE chunks, WebSocket frames or one
// JSON response.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include "io/http_types.hpp"
#include "src/api/generation_request.hpp"
#include "actors/stream/stream_hub.hpp"
#include "src/common/metrics.hpp"
#include "server/api/responses_sinks.hpp"
#include "server/api/sinks.hpp"
#include "server/engine/engine.hpp"
#include "src/chat/tool_format.hpp"

namespace strata::api {

using sched::stream_sink;
using stream::hub_address;

/// Bodies (or WebSocket messages) from this size on are parsed, rendered and tokenized on the
/// pool; below it the work takes well under a millisecond and stays on the connection's thread.
inline constexpr std::size_t k_inline_bytes = 16 << 10;

/// Whether a request body is prepared on the service's pool: a large one, or one that may carry a
/// grammar (whose compile takes tens of milliseconds on a large vocabulary when not cached).
bool prepare_on_pool(std::string_view body);

/// An error reply: e's status, `body` (OpenAI's error shape when empty), Retry-After on a 429.
io::http_response error_response(unsigned version, const api_error& e, std::string body = {});

/// Requests are parsed, their chat templates rendered and their prompts tokenized on the
/// connection's thread when the body is small; a larger one is handed to the service's own small
/// pool (async_reply), so that a prompt of megabytes never holds up the other connections of that
/// thread.
class completions_service {
 public:
  completions_service(const engine::engine& e, hub_address hub);
  ~completions_service();

  io::handler_result chat(io::http_request& req, const io::request_context& ctx);
  io::handler_result completion(io::http_request& req, const io::request_context& ctx);
  io::handler_result tokenize(io::http_request& req, const io::request_context& ctx);
  io::handler_result detokenize(io::http_request& req, const io::request_context& ctx);
  io::handler_result websocket(io::http_request& req, const io::request_context& ctx);
  /// Anthropic's Messages API (messages_service.cpp): POST /v1/messages and
  /// /v1/messages/count_tokens, with errors in Anthropic's shape.
  io::handler_result messages(io::http_request& req, const io::request_context& ctx);
  io::handler_result count_tokens(io::http_request& req, const io::request_context& ctx);
  /// OpenAI's Responses API (responses_service.cpp): POST /v1/responses, GET and DELETE
  /// /v1/responses/{id}.
  io::handler_result responses(io::http_request& req, const io::request_context& ctx);
  io::handler_result response_get(io::http_request& req, const io::request_context& ctx);
  io::handler_result response_delete(io::http_request& req, const io::request_context& ctx);
  /// POST /internal/chain (chain_service.cpp): the cluster-directory keys of the full blocks of
  /// the prompt that the request in the body (of the endpoint the x-strata-path header names)
  /// would have here, as {"keys":[...],"prompt_tokens":N}: what `strata route` looks up.
  io::handler_result chain(io::http_request& req, const io::request_context& ctx);
  /// GET /internal/kv/{hash}[?kind=snapshot] (kv_service.cpp): the block (or the boundary
  /// snapshot) with this chain hash as a wire record (io/ssd/wire_record.hpp), from RAM or the
  /// SSD tier, by value; 404 when this replica does not hold it.
  io::handler_result kv_record(io::http_request& req, const io::request_context& ctx);

 private:
  io::handler_result generate(io::http_request& req, const io::request_context& ctx, bool chat);
  /// Prompt tokens and settings ready to submit, or an error (404 model_not_found for a `model`
  /// this server does not serve). `key_salt`: the salt of the
  /// request's API key, mixed with the body's cache_salt. A prompt text longer than
  /// max_prompt_bytes_ is refused before it is tokenized. Slow for a large prompt: see above.
  std::optional<api_error> prepare(generation_request& r, std::string_view key_salt);
  /// Chat: renders the conversation (with the request's own chat_template if it gave one; a last
  /// assistant message continued unless asked otherwise) with its tools and template variables
  /// into `text`, and sets
  /// how the output is read (r.output) and, for tool_choice "required" or a named function, the
  /// grammar of the calls. tool_choice "none" offers no tools: the template does not see them and
  /// no calls are read.
  std::optional<api_error> render_chat(generation_request& r, std::string& text) const;
  /// How a template of this source writes tool calls and reasoning, with this vocabulary's
  /// control tokens.
  chat::tool_format format_of(std::string_view source) const;
  /// Parses `body` and prepares the request on the pool, then start()s it back on the
  /// connection's strand.
  boost::asio::awaitable<io::handler_result> prepare_off_thread(std::shared_ptr<std::string> body, bool chat, unsigned version,
                                                                io::request_context ctx);
  /// Submits a prepared request and returns its reply (a stream, or a response to come).
  io::handler_result start(generation_request& r, unsigned version, const io::request_context& ctx);
  /// Makes the sink of a request's reply: streamed or not.
  using sink_maker = std::function<std::unique_ptr<stream_sink>(io::reply_address out, bool streamed)>;
  /// Submits a prepared request whose sequences are `ids` with the sink `make_sink` makes, and
  /// returns its reply: an SSE stream, or one response to come. A client gone cancels the
  /// sequences; a stream the client reads too slowly pauses them.
  io::handler_result reply(generation_request& r, const std::vector<std::uint64_t>& ids, unsigned version,
                           const io::request_context& ctx, const sink_maker& make_sink);
  /// Registers `sink` and submits the request's n sequences; returns their scheduler ids.
  std::vector<std::uint64_t> submit(generation_request& r, std::unique_ptr<stream_sink> sink, std::vector<std::uint64_t> ids);
  std::vector<std::uint64_t> new_ids(int n);
  /// The choices of a request: n for each of its prompts.
  static int choices_of(const generation_request& r) { return r.n * (1 + static_cast<int>(r.more_prompts.size())); }
  /// What the sinks of a request whose choices are `ids` need, its response id `id`.
  response_meta meta_of(const generation_request& r, std::string id, const std::vector<std::uint64_t>& ids) const;
  /// A Messages body parsed into a generation request and prepared (count_only: for
  /// count_tokens); an error otherwise.
  std::optional<api_error> prepare_message(const std::string& body, bool count_only, std::string_view key_salt,
                                           generation_request& r);
  boost::asio::awaitable<io::handler_result> prepare_message_off_thread(std::shared_ptr<std::string> body, bool count_only,
                                                                        unsigned version, io::request_context ctx);
  /// A Responses body parsed into a generation request and prepared; the response begun (its
  /// echoed members) and the conversation to store go to `ctx`.
  std::optional<api_error> prepare_response(const std::string& body, std::string_view key_salt, generation_request& r,
                                            response_context& ctx);
  boost::asio::awaitable<io::handler_result> prepare_response_off_thread(std::shared_ptr<std::string> body, unsigned version,
                                                                         io::request_context ctx);
  io::handler_result answer_response(generation_request& r, response_context rc, unsigned version, const io::request_context& ctx);
  /// The reply to a prepared Messages request (count_only: its token count).
  io::handler_result answer_message(generation_request& r, bool count_only, unsigned version, const io::request_context& ctx);

  const engine::engine& engine_;
  hub_address hub_;
  std::atomic<std::uint64_t> next_id_{1};
  /// The most bytes of prompt text the context can hold: the context length times the most bytes
  /// one token stands for. Any longer prompt has more tokens than the context.
  std::size_t max_prompt_bytes_ = 0;
  /// How the model writes tool calls and reasoning, from its chat template.
  chat::tool_format tool_format_;
  /// Renders and tokenizes large prompts.
  boost::asio::thread_pool pool_{2};
  /// Stored responses (Responses API): at most 1,024 of them in at most 64 MiB, oldest out first.
  std::shared_ptr<response_store> responses_ = std::make_shared<response_store>(1024, std::size_t{64} << 20);
};

}  // namespace strata::api
