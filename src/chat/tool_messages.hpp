#pragma once
// tool_messages: a conversation's messages as a template of a given tool_format should see them.
//
// A template with its own tool format gets the history as Hugging Face templates expect it: each
// assistant call's `arguments` string that holds a JSON object is given as that object (templates
// write it with `tojson`). The fallback (a template without tools) gets the tools described in
// a system message (or, with `retry`, at the head of the first user message, for templates that
// refuse a system role) and the history written into the messages' text: an
// assistant's calls as `<tool_call>` blocks after its content, tool results as a user message of
// `<tool_response>` blocks (consecutive results in one), so that roles still alternate. A native
// template that fails on an assistant's null content (Qwen3's tests `'</think>' in content`) is
// retried with "" for it.

#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "src/chat/chat_template.hpp"
#include "src/chat/tool_format.hpp"

namespace strata::chat {

/// `messages` for a template of format `f`; `tools` (null when none or not offered) are described
/// by the fallback.
boost::json::array messages_for_template(const boost::json::array& messages, const tool_format& f, const boost::json::value& tools,
                                         bool retry = false);

/// Renders a conversation with its tools (null: none offered) through `t`, a template of format
/// `f`, with the roles it knows (with_template_roles), the generation prompt when
/// `add_generation_prompt`, and every key of `extra` (chat_template_kwargs, reasoning_effort) in
/// the context. A native template gets `tools`. A failed rendering is retried once (see above).
result<std::string> render_with_tools(const chat_template& t, const tool_format& f, const boost::json::array& messages,
                                      const boost::json::value& tools, const boost::json::object& extra, std::string_view bos,
                                      std::string_view eos, bool add_generation_prompt = true);

/// The fallback's description of `tools` and of the `<tool_call>` answer it asks for.
std::string fallback_tools_prompt(const boost::json::value& tools);

}  // namespace strata::chat
