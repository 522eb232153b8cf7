// OpenAI's Responses API on the completions service: the body is mapped onto a chat generation
// request (src/api/responses_request.hpp), with the stored conversation of previous_response_id
// between its instructions and its input, prepared like any other, and answered by the Responses
// sinks; stored responses are read back and deleted by id.

#include <chrono>

#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include "server/api/completions_service.hpp"
#include "server/api/on_pool.hpp"
#include "src/api/responses_request.hpp"

namespace strata::api {
namespace {

namespace json = boost::json;

/// The {id} of /v1/responses/{id}.
std::string id_of(const io::http_request& req) {
  std::string_view target = req.target();
  target = target.substr(0, target.find('?'));
  return std::string(target.substr(target.rfind('/') + 1));
}

api_error not_found(const std::string& id, std::string param) {
  return {404, "no stored response has the id '" + id + "'", "invalid_request_error", std::move(param), "not_found"};
}

}  // namespace

std::optional<api_error> completions_service::prepare_response(const std::string& body, std::string_view key_salt, generation_request& r,
                                                               response_context& rc) {
  auto parsed = schema::parse_responses_request(body);
  if (!parsed) return std::move(parsed).err();
  auto& q = parsed.value();
  if (!q.previous_response_id.empty()) {
    auto prev = responses_->get(q.previous_response_id);
    if (!prev) return not_found(q.previous_response_id, "previous_response_id");
    rc.conversation = std::move(prev->conversation);
  }
  for (auto& m : q.input) rc.conversation.push_back(m);
  r.chat = true;
  r.model = q.model;
  r.stream = q.stream;
  r.n = 1;
  r.max_tokens = q.max_output_tokens;
  r.max_tokens_key = "max_output_tokens";
  r.messages = q.instructions;
  for (const auto& m : rc.conversation) r.messages.push_back(m);
  r.tools = q.tools;
  r.tool_choice = q.tool_choice;
  r.parallel_tool_calls = q.parallel_tool_calls;
  if (!q.reasoning_effort.empty()) r.template_kwargs["reasoning_effort"] = q.reasoning_effort;
  if (q.grammar.active()) {
    r.settings.grammar = std::move(q.grammar);
    r.grammar_field = "text.format";
  }
  auto& s = r.settings.sampling;
  s.temperature = static_cast<float>(q.temperature);
  s.top_p = static_cast<float>(q.top_p);
  s.seed = q.seed ? static_cast<std::uint64_t>(*q.seed) : fresh_seed();
  if (auto e = prepare(r, key_salt)) return e;

  auto& st = rc.state;
  st.model = engine_.model_id();
  st.created_at = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  st.instructions = std::move(q.echo_instructions);
  st.tools = std::move(q.echo_tools);
  st.tool_choice = std::move(q.echo_tool_choice);
  st.text = std::move(q.echo_text);
  st.metadata = std::move(q.echo_metadata);
  st.reasoning = std::move(q.echo_reasoning);
  st.parallel_tool_calls = q.parallel_tool_calls;
  st.store = q.store;
  st.temperature = q.temperature;
  st.top_p = q.top_p;
  st.max_output_tokens = q.max_output_tokens.value_or(0);
  st.previous_response_id = q.previous_response_id;
  st.input_tokens = static_cast<std::int64_t>(r.prompt_tokens.size());
  rc.output = r.output;
  if (q.store) rc.store = responses_;
  return std::nullopt;
}

io::handler_result completions_service::responses(io::http_request& req, const io::request_context& ctx) {
  auto body = std::make_shared<std::string>(std::move(req.body()));
  const unsigned version = req.version();
  return io::async_reply{[this, body, version, ctx] { return prepare_response_off_thread(body, version, ctx); }};
}

boost::asio::awaitable<io::handler_result> completions_service::prepare_response_off_thread(std::shared_ptr<std::string> body,
                                                                                          unsigned version, io::request_context ctx) {
  auto r = std::make_shared<generation_request>();
  auto rc = std::make_shared<response_context>();
  auto work = [this, body, r, rc, salt = ctx.key_salt]() { return prepare_response(*body, salt, *r, *rc); };
  auto e = co_await on_pool(pool_, std::move(work));
  if (e) co_return error_response(version, *e);
  co_return answer_response(*r, std::move(*rc), version, ctx);
}

io::handler_result completions_service::answer_response(generation_request& r, response_context rc, unsigned version,
                                                        const io::request_context& ctx) {
  auto ids = new_ids(1);
  rc.id = ids.front();
  rc.state.id = "resp_" + ctx.request_id.substr(ctx.request_id.find('-') + 1) + std::to_string(ids.front());
  spdlog::debug("[{}] responses: {} prompt tokens, max_tokens {}, stream {}", ctx.request_id, r.prompt_tokens.size(), r.settings.max_tokens,
                r.stream);
  return reply(r, ids, version, ctx, [&](io::reply_address out, bool streamed) -> std::unique_ptr<sched::stream_sink> {
    if (!streamed) return std::make_unique<response_full_sink>(std::move(rc), std::move(out));
    return std::make_unique<response_stream_sink>(std::move(rc), std::move(out));
  });
}

io::handler_result completions_service::response_get(io::http_request& req, const io::request_context&) {
  const auto id = id_of(req);
  auto stored = responses_->get(id);
  if (!stored) return error_response(req.version(), not_found(id, "response_id"));
  return io::make_json(req.version(), io::http::status::ok, std::move(stored->response_json));
}

io::handler_result completions_service::response_delete(io::http_request& req, const io::request_context&) {
  const auto id = id_of(req);
  if (!responses_->erase(id)) return error_response(req.version(), not_found(id, "response_id"));
  return io::make_json(req.version(), io::http::status::ok,
                       R"({"id":)" + json::serialize(json::value(id)) + R"(,"object":"response.deleted","deleted":true})");
}

}  // namespace strata::api
