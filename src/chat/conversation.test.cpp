// Unit tests of the roles a template sees (developer as system, leading system messages merged)
// and of continuing a last assistant message, on ChatML, a harmony-style template that knows the
// developer role, and shared templates that do not.

#include "src/chat/conversation.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "src/chat/tool_format.hpp"
#include "src/chat/tool_messages.hpp"

namespace {

using namespace strata::chat;
namespace json = boost::json;

const char* const k_chatml =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const char* const k_harmony =
    "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant{% endif %}";

std::string shared_template(const std::string& name) {
  std::ifstream in(std::string(STRATA_SHARED_DIR) + "/templates/" + name + ".jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string render(const std::string& source, const char* messages, bool generation = true) {
  auto t = chat_template::parse(source);
  EXPECT_TRUE(t.has_value());
  auto text = render_with_tools(*t, detect_tool_format(source), json::parse(messages).as_array(), json::value(), {}, "<s>", "</s>",
                                generation);
  EXPECT_TRUE(text.has_value()) << (text ? "" : text.err().message);
  return text ? *text : std::string();
}

TEST(conversation, chatml_renders_a_developer_message_as_its_system_message) {
  EXPECT_EQ(render(k_chatml, R"([{"role":"developer","content":"Be terse."},{"role":"user","content":"hi"}])"),
            "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(conversation, leading_developer_and_system_messages_become_one_system_block) {
  EXPECT_EQ(render(k_chatml, R"([{"role":"developer","content":"A."},{"role":"system","content":"B."},{"role":"user","content":"hi"},)"
                             R"({"role":"developer","content":"C."}])",
                   false),
            "<|im_start|>system\nA.\n\nB.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>system\nC.<|im_end|>\n");
}

TEST(conversation, a_template_that_knows_the_developer_role_gets_it_as_given) {
  EXPECT_TRUE(detect_tool_format(k_harmony + std::string("{# developer #}")).developer_role);
  EXPECT_FALSE(detect_tool_format(k_chatml).developer_role);
  const std::string harmony = k_harmony + std::string("{% if false %}developer{% endif %}");
  EXPECT_EQ(render(harmony, R"([{"role":"system","content":"S"},{"role":"developer","content":"D"},{"role":"user","content":"hi"}])"),
            "<|start|>system<|message|>S<|end|><|start|>developer<|message|>D<|end|><|start|>user<|message|>hi<|end|><|start|>assistant");
}

TEST(conversation, llama_3_1_takes_a_developer_message_as_its_system_prompt) {
  const std::string llama = shared_template("meta-llama-Llama-3.1-8B-Instruct");
  ASSERT_FALSE(llama.empty());
  EXPECT_FALSE(has_developer_role(llama));
  const std::string as_system = render(llama, R"([{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}])");
  EXPECT_NE(as_system.find("Be terse."), std::string::npos);
  EXPECT_EQ(render(llama, R"([{"role":"developer","content":"Be terse."},{"role":"user","content":"hi"}])"), as_system);
  EXPECT_EQ(render(llama, R"([{"role":"developer","content":"Be"},{"role":"system","content":"terse."},{"role":"user","content":"hi"}])"),
            render(llama, R"([{"role":"system","content":"Be\n\nterse."},{"role":"user","content":"hi"}])"));
}

TEST(conversation, a_last_assistant_message_with_text_is_a_prefill) {
  EXPECT_TRUE(ends_with_prefill(json::parse(R"([{"role":"user","content":"hi"},{"role":"assistant","content":"Once"}])").as_array()));
  EXPECT_FALSE(ends_with_prefill(json::parse(R"([{"role":"user","content":"hi"}])").as_array()));
  EXPECT_FALSE(ends_with_prefill(json::parse(R"([{"role":"assistant","content":""}])").as_array()));
  EXPECT_FALSE(ends_with_prefill(json::parse(R"([{"role":"assistant","content":null}])").as_array()));
  EXPECT_FALSE(ends_with_prefill(json::parse(
      R"([{"role":"assistant","content":"x","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}])")
                                     .as_array()));
}

TEST(conversation, a_continued_message_ends_the_prompt_without_its_end_of_turn) {
  const char* convo = R"([{"role":"user","content":"hi"},{"role":"assistant","content":"Once upon "}])";
  auto cut = continue_final_message(render(k_chatml, convo, false), "Once upon ");
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(*cut, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nOnce upon ");
  // Llama's template trims the content: the trimmed text is found.
  const std::string llama = shared_template("meta-llama-Llama-3.1-8B-Instruct");
  auto trimmed = continue_final_message(render(llama, convo, false), "Once upon ");
  ASSERT_TRUE(trimmed.has_value());
  EXPECT_TRUE(trimmed->ends_with("<|start_header_id|>assistant<|end_header_id|>\n\nOnce upon")) << *trimmed;
  auto missing = continue_final_message("<|im_start|>assistant\nsomething else<|im_end|>", "Once upon");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.err().message.find("cannot be continued"), std::string::npos);
}

}  // namespace
