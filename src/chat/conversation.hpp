#pragma once
// conversation: what the server does to a conversation around its chat template. The `developer`
// role (OpenAI's newer name for system) becomes `system` for templates that know no developer
// role, and the leading system messages are merged into one block, as templates that take the
// system prompt from messages[0] expect. An assistant prefill (a last assistant message) is
// continued: the prompt ends with that message's content, not with its end of turn.

#include <string>
#include <string_view>

#include <boost/json/array.hpp>

#include "src/common/error.hpp"

namespace strata::chat {

/// Whether a template's source names the developer role (Harmony's templates do; ChatML,
/// Llama's, Qwen's do not).
bool has_developer_role(std::string_view template_source);

/// `messages` with the roles a template sees: where `developer_role` is false, developer
/// messages become system messages, and the system messages at the head of the conversation
/// become one, their contents joined by a blank line.
boost::json::array with_template_roles(const boost::json::array& messages, bool developer_role);

/// Whether `messages` ends with an assistant message that can be continued: string content that
/// is not empty, and no tool calls.
bool ends_with_prefill(const boost::json::array& messages);

/// The prompt that continues `content`, the last message: `rendered` (the conversation rendered
/// without a generation prompt) cut right after the last place it holds `content` (or `content`
/// with its trailing white space trimmed, which some templates strip). errc::template_error when
/// the template does not write the content as given.
result<std::string> continue_final_message(std::string rendered, std::string_view content);

}  // namespace strata::chat
