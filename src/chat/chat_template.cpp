#include "src/chat/chat_template.hpp"

#include <exception>
#include <new>

#include "src/chat/ast.hpp"
#include "src/chat/lexer.hpp"
#include "src/chat/parser.hpp"
#include "src/chat/template_exception.hpp"
#include "src/chat/value_format.hpp"

namespace strata::chat {

struct chat_template::program {
  std::vector<stmt_ptr> body;
};

result<chat_template> chat_template::parse(std::string source) {
  try {
    auto p = std::make_shared<program>();
    p->body = parser(lexer(std::move(source)).tokenize()).parse();
    return chat_template(std::move(p));
  } catch (const template_exception& e) {
    return fail(errc::template_error, "template syntax error at line ", e.line(), ": ", e.message());
  } catch (const std::bad_alloc&) {
    return fail(errc::limit_exceeded, "out of memory while parsing the template");
  }
}

result<std::string> chat_template::render(const boost::json::value& context) const {
  if (!context.is_object()) return fail(errc::invalid_argument, "the template context must be a JSON object");
  try {
    value ctx = from_json(context);
    evaluator ev(limits_, clock_);
    return ev.render(program_->body, ctx.as_dict());
  } catch (const template_exception& e) {
    if (e.raised_by_template() || e.line() == 0) return error{e.code(), e.message()};
    return fail(e.code(), e.message(), " (template line ", e.line(), ")");
  } catch (const std::bad_alloc&) {
    return fail(errc::limit_exceeded, "out of memory while rendering the template");
  } catch (const std::exception& e) {
    return fail(errc::template_error, "template rendering failed: ", e.what());
  }
}

result<std::string> chat_template::render_chat(const boost::json::array& messages, bool add_generation_prompt,
                                               std::string_view bos_token, std::string_view eos_token,
                                               const boost::json::object& extra_context) const {
  boost::json::object ctx;
  ctx["messages"] = messages;
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  for (const auto& [k, v] : extra_context) ctx[k] = v;
  return render(boost::json::value(std::move(ctx)));
}

}  // namespace strata::chat
