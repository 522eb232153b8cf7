// POST /internal/chain: names the blocks of a request's prompt in the cluster directory. The
// request is prepared exactly as its own endpoint prepares it (template, tools, the Responses
// API's stored conversation, the cache salt of the API key and of the body), so the keys are those
// the replica that runs it will list; nothing is submitted.

#include <boost/json.hpp>

#include "server/api/completions_service.hpp"
#include "server/api/on_pool.hpp"
#include "server/api/responses_sinks.hpp"
#include "src/kv/directory_key.hpp"

namespace strata::api {
namespace {

/// The reply `f` makes on `pool` (a function, not a coroutine lambda, so f lives in its frame).
template <class F>
boost::asio::awaitable<io::handler_result> answer_on_pool(boost::asio::thread_pool& pool, F f) {
  co_return co_await on_pool(pool, std::move(f));
}

}  // namespace

io::handler_result completions_service::chain(io::http_request& req, const io::request_context& ctx) {
  const unsigned version = req.version();
  const std::string path(req["x-strata-path"]);
  auto body = std::make_shared<std::string>(std::move(req.body()));
  auto work = [this, body, path, salt = ctx.key_salt, version]() -> io::handler_result {
    generation_request r;
    std::optional<api_error> e;
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      e = parse_generation_request(*body, path == "/v1/chat/completions", r);
      if (!e) e = prepare(r, salt);
    } else if (path == "/v1/messages") {
      e = prepare_message(*body, true, salt, r);
    } else if (path == "/v1/responses") {
      response_context rc;
      e = prepare_response(*body, salt, r, rc);
    } else {
      e = invalid_request("x-strata-path", "expected /v1/chat/completions, /v1/completions, /v1/messages or /v1/responses");
    }
    if (e) return error_response(version, *e);
    kv::cache_namespace ns;
    ns.model = engine_.fingerprint();
    ns.q4_keys = engine_.q4_keys_digest();
    ns.format = r.settings.kv_format;
    ns.block_tokens = engine_.block_tokens();
    // The last prompt token is always computed: the blocks before it are the ones a replica reuses.
    std::span<const std::int32_t> tokens(r.prompt_tokens);
    if (!tokens.empty()) tokens = tokens.first(tokens.size() - 1);
    kv::prefix_hasher hasher;
    const std::string prefix = kv::directory_prefix(ns.model);
    boost::json::array keys;
    for (const auto& h : kv::chain_hashes(hasher, ns, r.settings.cache_salt, tokens))
      keys.emplace_back(kv::directory_key(prefix, ns.format, ns.block_tokens, h));
    boost::json::object out{{"keys", std::move(keys)}, {"prompt_tokens", r.prompt_tokens.size()}};
    return io::make_json(version, io::http::status::ok, boost::json::serialize(out));
  };
  return io::async_reply{[this, work] { return answer_on_pool(pool_, work); }};
}

}  // namespace strata::api
