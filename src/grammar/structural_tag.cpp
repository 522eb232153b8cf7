#include "src/grammar/structural_tag.hpp"

#include <boost/json.hpp>

namespace strata::grammar {
namespace {

namespace json = boost::json;

/// JSON in a structural tag may carry whitespace between items; a bound keeps a model from
/// padding forever.
json::object json_format(json::value schema) {
  // xgrammar reads schemas here in strict mode (no properties beyond those named): a schema that
  // names none ("{}", {"type": "object"}) would allow only {}; it means any object.
  if (schema.is_object() && (schema.as_object().empty() || schema.as_object() == json::object{{"type", "object"}}))
    schema = json::object{{"type", "object"}, {"additionalProperties", true}};
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}, {"max_whitespace_cnt", max_argument_whitespace}};
}

json::object const_string(const std::string& s) { return {{"type", "const_string"}, {"value", s}}; }

json::object sequence(json::array elements) {
  if (elements.size() == 1) return elements[0].as_object();
  return {{"type", "sequence"}, {"elements", std::move(elements)}};
}

result<json::value> parse_schema(const std::string& text, const char* what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return fail(errc::invalid_argument, what, " is not valid JSON: ", ec.message());
  if (!v.is_object() && !v.is_bool()) return fail(errc::invalid_argument, what, " must be a JSON object");
  return v;
}

/// The constrained part of a spec, as a structural-tag format.
result<json::object> answer_format(const sampling::grammar_spec& spec, int& call) {
  using kind = sampling::grammar_spec::kind;
  switch (spec.type) {
    case kind::json_object:
      return json_format(json::object{});
    case kind::json_schema: {
      auto schema = parse_schema(spec.text, "the schema");
      if (!schema) return std::move(schema).err();
      return json_format(std::move(*schema));
    }
    case kind::ebnf:
      return json::object{{"type", "grammar"}, {"grammar", spec.text}};
    case kind::tool_calls: {
      if (spec.calls.empty()) return fail(errc::invalid_argument, "tool_calls needs at least one call");
      json::array tags;
      for (std::size_t i = 0; i < spec.calls.size(); ++i) {
        const auto& c = spec.calls[i];
        auto schema = parse_schema(c.schema.empty() ? "{}" : c.schema, "the function's parameters");
        if (!schema) {
          call = static_cast<int>(i);
          return std::move(schema).err();
        }
        tags.push_back(json::object{{"type", "tag"}, {"begin", c.begin}, {"content", json_format(std::move(*schema))}, {"end", c.end}});
      }
      // Strict tools in auto mode: free text, and a call wherever the model starts one.
      if (!spec.trigger.empty())
        return json::object{{"type", "triggered_tags"}, {"triggers", json::array{spec.trigger}}, {"tags", std::move(tags)},
                            {"at_least_one", false}, {"stop_after_first", !spec.parallel}};
      json::object calls{{"type", "tags_with_separator"}, {"tags", std::move(tags)}, {"separator", spec.parallel ? spec.separator : ""},
                         {"at_least_one", true}, {"stop_after_first", !spec.parallel}};
      json::array parts;
      if (!spec.prefix.empty()) parts.push_back(const_string(spec.prefix));
      parts.push_back(std::move(calls));
      if (!spec.suffix.empty()) parts.push_back(const_string(spec.suffix));
      return sequence(std::move(parts));
    }
    case kind::none:
      break;
  }
  return fail(errc::invalid_argument, "no grammar to compile");
}

}  // namespace

result<std::string> structural_tag_json(const sampling::grammar_spec& spec, int& call) {
  call = -1;
  auto answer = answer_format(spec, call);
  if (!answer) return std::move(answer).err();
  json::object format = std::move(*answer);
  if (spec.reasoning) {
    const auto& r = *spec.reasoning;
    json::object text{{"type", "any_text"}, {"excludes", json::array{r.close}}};
    // An empty open: the prompt opened the block, and the model writes up to its close.
    json::object block{{"type", "tag"}, {"begin", r.open}, {"content", std::move(text)}, {"end", r.close}};
    json::array parts;
    if (r.open.empty()) {
      parts.push_back(std::move(block));
    } else {
      parts.push_back(json::object{{"type", "optional"}, {"content", std::move(block)}});
    }
    parts.push_back(std::move(format));
    format = sequence(std::move(parts));
  }
  return json::serialize(json::object{{"type", "structural_tag"}, {"format", std::move(format)}});
}

}  // namespace strata::grammar
