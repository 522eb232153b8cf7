// sampling_reader's members that constrain the output: OpenAI's `response_format`, and
// llama.cpp's `grammar` (a GBNF string) and `json_schema` (an object). Each becomes the
// grammar_spec of the request; the engine compiles it when the request is prepared (a schema or
// grammar it cannot compile is a 400 naming the member there).

#include <boost/json.hpp>

#include "src/api/sampling_reader.hpp"

namespace strata::api::schema {
namespace {

namespace json = boost::json;
using kind = sampling::grammar_spec::kind;

/// A schema as the engine reads it: a JSON object (true and false are schemas too).
api_status schema_text(od::value& v, int depth, std::string_view param, std::string& out) {
  json::value schema;
  if (auto st = read_json(v, depth, schema)) return st;
  if (!schema.is_object() && !schema.is_bool()) return invalid_request(std::string(param), std::string(param) + " must be a JSON schema (an object)");
  out = json::serialize(schema);
  return std::nullopt;
}

/// response_format.json_schema: {name, schema, strict, description}.
api_status read_json_schema_format(od::value& v, sampling::grammar_spec& spec) {
  bool has_schema = false;
  std::optional<std::string> name;
  api_status st = for_each_member(v, "response_format.json_schema", 3, [&](std::string_view key, od::value& m) -> api_status {
    if (key == "name") return read_string(m, "response_format.json_schema.name", name);
    if (key == "strict") {
      std::optional<bool> strict;
      if (auto e = read_bool(m, "response_format.json_schema.strict", strict)) return e;
      spec.strict = strict.value_or(false);
      return std::nullopt;
    }
    if (key == "description") {
      std::optional<std::string> d;  // for the model's prompt in OpenAI's API; not used here
      return read_string(m, "response_format.json_schema.description", d);
    }
    if (key == "schema") {
      has_schema = true;
      return schema_text(m, 4, "response_format.json_schema.schema", spec.text);
    }
    return skip_value(m, 4);
  });
  if (st) return st;
  if (!name || name->empty()) return invalid_request("response_format", "response_format.json_schema.name is required");
  // OpenAI allows a json_schema without a schema: any JSON object then.
  if (!has_schema) spec.text = R"({"type": "object"})";
  return std::nullopt;
}

}  // namespace

api_status sampling_reader::read_response_format(od::value& value) {
  api_status st;
  if (take_null(value, st) || st) return st;
  std::optional<std::string> type;
  sampling::grammar_spec spec;
  bool has_json_schema = false;
  st = for_each_member(value, "response_format", 2, [&](std::string_view key, od::value& v) -> api_status {
    if (key == "type") return read_string(v, "response_format.type", type);
    if (key == "json_schema") {
      api_status e;
      if (take_null(v, e) || e) return e;
      has_json_schema = true;
      return read_json_schema_format(v, spec);
    }
    return skip_value(v, 3);
  });
  if (st) return st;
  if (!type) return invalid_request("response_format", "response_format.type is required");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    spec = {};
    spec.type = kind::json_object;
  } else if (*type == "json_schema") {
    if (!has_json_schema) return invalid_request("response_format", "response_format.json_schema is required when type is \"json_schema\"");
    spec.type = kind::json_schema;
  } else {
    return invalid_request("response_format", "response_format type \"" + *type +
                                                  "\" is not supported; use \"text\", \"json_object\" or \"json_schema\"");
  }
  return set_grammar("response_format", std::move(spec));
}

api_status sampling_reader::read_grammar(std::string_view key, od::value& value) {
  api_status st;
  if (take_null(value, st) || st) return st;
  sampling::grammar_spec spec;
  if (key == "grammar") {
    std::optional<std::string> text;
    if ((st = read_string(value, key, text))) return st;
    if (text->empty()) return std::nullopt;  // llama.cpp: an empty grammar is none
    spec.type = kind::ebnf;
    spec.text = std::move(*text);
  } else {
    if ((st = schema_text(value, 2, key, spec.text))) return st;
    spec.type = kind::json_schema;
  }
  return set_grammar(key, std::move(spec));
}

api_status sampling_reader::set_grammar(std::string_view field, sampling::grammar_spec spec) {
  if (params_.grammar.active())
    return invalid_request(std::string(field), "only one of response_format (json_object or json_schema), grammar and json_schema may be given; " +
                                      params_.grammar_field + " came first");
  params_.grammar = std::move(spec);
  params_.grammar_field = std::string(field);
  return std::nullopt;
}

}  // namespace strata::api::schema
