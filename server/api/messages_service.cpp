// Anthropic's Messages API on the completions service: the body is mapped onto a chat generation
// request (src/api/messages_request.hpp), prepared like any other, and answered by the Messages
// sinks.

#include <spdlog/spdlog.h>

#include "server/api/completions_service.hpp"
#include "server/api/messages_sinks.hpp"
#include "server/api/on_pool.hpp"
#include "src/api/messages_request.hpp"
#include "src/sampling/text_stream.hpp"

namespace strata::api {
namespace {

io::http_response anthropic_error(unsigned version, const api_error& e) {
  return error_response(version, e, schema::write_anthropic_error(e));
}

std::optional<api_error> to_generation_request(schema::messages_request& m, generation_request& r) {
  if (auto ok = sampling::text_stream::validate_stop(m.stop_sequences); !ok)
    return invalid_request("stop_sequences", ok.err().message);
  r.chat = true;
  r.model = std::move(m.model);
  r.stream = m.stream;
  r.n = 1;
  r.max_tokens = m.max_tokens > 0 ? std::optional<std::int64_t>(m.max_tokens) : std::nullopt;
  r.messages = std::move(m.messages);
  r.tools = std::move(m.tools);
  r.tool_choice = std::move(m.tool_choice);
  r.parallel_tool_calls = m.parallel_tool_calls;
  // Anthropic models think only when asked to; templates that think by default are told so.
  r.template_kwargs["enable_thinking"] = m.thinking;
  auto& s = r.settings.sampling;
  s.temperature = static_cast<float>(m.temperature);
  s.top_p = static_cast<float>(m.top_p);
  s.top_k = static_cast<std::int32_t>(m.top_k);
  s.seed = m.seed ? static_cast<std::uint64_t>(*m.seed) : fresh_seed();
  r.settings.stop = std::move(m.stop_sequences);
  return std::nullopt;
}

}  // namespace

std::optional<api_error> completions_service::prepare_message(const std::string& body, bool count_only, std::string_view key_salt,
                                                              generation_request& r) {
  auto m = schema::parse_messages_request(body, count_only);
  if (!m) return std::move(m).err();
  if (auto e = to_generation_request(m.value(), r)) return e;
  return prepare(r, key_salt);
}

io::handler_result completions_service::messages(io::http_request& req, const io::request_context& ctx) {
  const unsigned version = req.version();
  if (prepare_on_pool(req.body())) {
    auto body = std::make_shared<std::string>(std::move(req.body()));
    return io::async_reply{[this, body, version, ctx] { return prepare_message_off_thread(body, false, version, ctx); }};
  }
  generation_request r;
  if (auto e = prepare_message(req.body(), false, ctx.key_salt, r)) return anthropic_error(version, *e);
  return answer_message(r, false, version, ctx);
}

io::handler_result completions_service::count_tokens(io::http_request& req, const io::request_context& ctx) {
  const unsigned version = req.version();
  auto body = std::make_shared<std::string>(std::move(req.body()));
  return io::async_reply{[this, body, version, ctx] { return prepare_message_off_thread(body, true, version, ctx); }};
}

boost::asio::awaitable<io::handler_result> completions_service::prepare_message_off_thread(std::shared_ptr<std::string> body, bool count_only,
                                                                                         unsigned version, io::request_context ctx) {
  auto r = std::make_shared<generation_request>();
  auto work = [this, body, count_only, r, salt = ctx.key_salt]() { return prepare_message(*body, count_only, salt, *r); };
  auto e = co_await on_pool(pool_, std::move(work));
  if (e) co_return anthropic_error(version, *e);
  co_return answer_message(*r, count_only, version, ctx);
}

io::handler_result completions_service::answer_message(generation_request& r, bool count_only, unsigned version,
                                                       const io::request_context& ctx) {
  const auto n_prompt = static_cast<std::int64_t>(r.prompt_tokens.size());
  if (count_only)
    return io::make_json(version, io::http::status::ok, R"({"input_tokens":)" + std::to_string(n_prompt) + "}");
  auto ids = new_ids(1);
  message_meta meta{{"msg_" + ctx.request_id, engine_.model_id()}, n_prompt, r.settings.stop, ids.front(), r.output};
  spdlog::debug("[{}] messages: {} prompt tokens, max_tokens {}, stream {}", ctx.request_id, n_prompt, r.settings.max_tokens, r.stream);
  return reply(r, ids, version, ctx, [&](io::reply_address out, bool streamed) -> std::unique_ptr<sched::stream_sink> {
    if (!streamed) return std::make_unique<message_full_sink>(std::move(meta), std::move(out));
    return std::make_unique<message_stream_sink>(std::move(meta), std::move(out));
  });
}

}  // namespace strata::api
