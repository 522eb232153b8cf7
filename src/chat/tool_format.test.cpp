// Unit tests of tool-format detection on the shared templates (and small ones of our own for the
// formats no shared template shows), and of rendering tool history through each shared template.

#include "src/chat/tool_format.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "src/chat/tool_messages.hpp"

namespace {

using namespace strata::chat;
namespace json = boost::json;

std::string shared_template(const std::string& name) {
  std::ifstream in(std::string(STRATA_SHARED_DIR) + "/templates/" + name + ".jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A template of our own in the Qwen3-Coder style: XML calls.
const char* const k_xml_template =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if tools %}Call as <tool_call>\n<function=NAME>\n<parameter=P>\nV\n</parameter>\n</function>\n</tool_call>{% endif %}"
    "<|im_start|>assistant\n";
/// A template of our own in the harmony style.
const char* const k_harmony_template =
    "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
    "{% if tools %}<|start|>developer<|message|>namespace functions {}<|end|>{% endif %}"
    "<|start|>assistant{% if reasoning_effort %}<|channel|>analysis{% endif %}";

TEST(tool_format, finds_each_shared_templates_format) {
  struct want {
    const char* name;
    tool_syntax syntax;
    bool native, thinks;
  };
  const want cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct", tool_syntax::hermes, true, false},
      {"Qwen-Qwen3-0.6B", tool_syntax::hermes, true, true},
      {"meta-llama-Llama-3.1-8B-Instruct", tool_syntax::llama3_json, true, false},
      {"meta-llama-Llama-3.2-3B-Instruct", tool_syntax::llama3_json, true, false},
      {"mistralai-Mistral-Nemo-Instruct-2407", tool_syntax::json_list, true, false},
      {"ibm-granite-granite-3.3-2B-Instruct", tool_syntax::json_list, true, true},
      {"HuggingFaceTB-SmolLM3-3B", tool_syntax::hermes, false, true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", tool_syntax::hermes, false, true},
      {"microsoft-Phi-3.5-mini-instruct", tool_syntax::hermes, false, false},
      {"google-gemma-2-2b-it", tool_syntax::hermes, false, false},
  };
  for (const auto& c : cases) {
    auto src = shared_template(c.name);
    ASSERT_FALSE(src.empty()) << c.name;
    auto f = detect_tool_format(src);
    EXPECT_EQ(f.syntax, c.syntax) << c.name;
    EXPECT_EQ(f.native, c.native) << c.name;
    EXPECT_EQ(f.thinks, c.thinks) << c.name;
  }
  EXPECT_EQ(detect_tool_format(shared_template("mistralai-Mistral-Nemo-Instruct-2407")).list_marker, "[TOOL_CALLS]");
  EXPECT_TRUE(detect_tool_format(shared_template("mistralai-Mistral-Nemo-Instruct-2407")).short_ids);
  EXPECT_EQ(detect_tool_format(shared_template("ibm-granite-granite-3.3-2B-Instruct")).list_marker, "<|tool_call|>");
}

TEST(tool_format, finds_xml_harmony_and_the_fallback_for_no_template) {
  EXPECT_EQ(detect_tool_format(k_xml_template).syntax, tool_syntax::qwen3_xml);
  EXPECT_EQ(detect_tool_format(k_harmony_template).syntax, tool_syntax::harmony);
  auto none = detect_tool_format("");
  EXPECT_EQ(none.syntax, tool_syntax::hermes);
  EXPECT_FALSE(none.native);
  EXPECT_EQ(none.describe(), "hermes (fallback)");
}

TEST(tool_format, lists_the_markup_the_vocabulary_holds_as_control_tokens) {
  auto f = detect_tool_format(shared_template("mistralai-Mistral-Nemo-Instruct-2407"),
                              [](std::string_view s) { return s == "[TOOL_CALLS]"; });
  EXPECT_EQ(f.control_markup, std::vector<std::string>{"[TOOL_CALLS]"});
  auto h = detect_tool_format(k_harmony_template, [](std::string_view s) { return s.rfind("<|", 0) == 0; });
  EXPECT_EQ(h.control_markup.size(), 7u);
}

const json::value k_tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather of a city",
    "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");

json::array history(const std::string& id) {
  return json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":")" + id + R"(","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
    {"role":"tool","tool_call_id":")" + id + R"(","content":"sunny, 21 C"}])").as_array();
}

TEST(tool_format, renders_tool_history_through_every_shared_template) {
  const char* names[] = {"Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct",
                         "meta-llama-Llama-3.2-3B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407",
                         "ibm-granite-granite-3.3-2B-Instruct", "HuggingFaceTB-SmolLM3-3B",
                         "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "microsoft-Phi-3.5-mini-instruct", "google-gemma-2-2b-it"};
  for (const char* name : names) {
    SCOPED_TRACE(name);
    auto src = shared_template(name);
    auto f = detect_tool_format(src);
    auto t = chat_template::parse(src);
    ASSERT_TRUE(t) << t.err().message;
    auto msgs = history(new_tool_call_id(f));
    if (std::string(name).find("gemma") != std::string::npos) msgs.erase(msgs.begin());  // it refuses system messages
    auto text = render_with_tools(*t, f, msgs, k_tools, {}, "<s>", "</s>");
    ASSERT_TRUE(text) << text.err().message;
    EXPECT_NE(text->find("sunny, 21 C"), std::string::npos) << *text;
    EXPECT_NE(text->find("Paris\"}"), std::string::npos) << "the call's arguments, as JSON: " << *text;
    EXPECT_NE(text->find("get_weather"), std::string::npos) << *text;
    // The tools are described: by the template, or by the fallback's system text.
    EXPECT_NE(text->find("Weather of a city"), std::string::npos) << *text;
    if (!f.native) {
      EXPECT_NE(text->find("<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"),
                std::string::npos) << *text;
    }
  }
}

TEST(tool_format, fallback_writes_history_into_text_that_alternates_roles) {
  auto msgs = history("call_1");
  msgs.push_back(json::parse(R"({"role":"tool","tool_call_id":"call_2","content":"windy"})"));
  auto out = messages_for_template(msgs, detect_tool_format(""), k_tools);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].at("role"), "system");
  EXPECT_EQ(std::string(out[0].at("content").as_string()).rfind("Be brief.\n\n# Tools", 0), 0u);
  EXPECT_EQ(out[2].at("content"), "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>");
  EXPECT_FALSE(out[2].as_object().contains("tool_calls"));
  EXPECT_EQ(out[3].at("role"), "user");
  EXPECT_EQ(out[3].at("content"), "<tool_response>\nsunny, 21 C\n</tool_response>\n<tool_response>\nwindy\n</tool_response>");
}

TEST(tool_format, renders_assistant_calls_with_null_content_through_the_builtin_chatml) {
  auto t = chat_template::parse(
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}");
  ASSERT_TRUE(t);
  auto text = render_with_tools(*t, detect_tool_format(""), history("call_1"), nullptr, {}, "", "");
  ASSERT_TRUE(text) << text.err().message;
  EXPECT_NE(text->find("<|im_start|>assistant\n<tool_call>"), std::string::npos) << *text;
  EXPECT_EQ(text->find("# Tools"), std::string::npos) << "no tools offered: none described";
}

TEST(tool_format, passes_tools_and_extra_context_to_native_templates) {
  auto t = chat_template::parse(k_harmony_template);
  ASSERT_TRUE(t);
  json::object extra;
  extra["reasoning_effort"] = "high";
  auto text = render_with_tools(*t, detect_tool_format(k_harmony_template), json::parse(R"([{"role":"user","content":"hi"}])").as_array(),
                                k_tools, extra, "", "");
  ASSERT_TRUE(text) << text.err().message;
  EXPECT_EQ(*text, "<|start|>user<|message|>hi<|end|><|start|>developer<|message|>namespace functions {}<|end|>"
                   "<|start|>assistant<|channel|>analysis");
}

}  // namespace
