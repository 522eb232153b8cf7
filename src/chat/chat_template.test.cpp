// Unit tests of chat templates, one feature at a time. The expected strings are what Python
// jinja2 renders with apply_chat_template's setup (tests/templates/make_features.py has the
// environment; tests/templates/ compares hundreds more cases and the shared reference ones).

#include "src/chat/chat_template.hpp"
#include "src/chat/fixed_clock.test.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace {

using strata::errc;
using strata::chat::chat_template;
using strata::chat::render_limits;

/// Renders `source` with the JSON object `context`; a failure comes back as "ERROR: message".
std::string render(const std::string& source, const std::string& context = "{}", render_limits limits = {}) {
  auto tpl = chat_template::parse(source);
  if (!tpl) return "SYNTAX: " + tpl.err().message;
  tpl->set_limits(limits);
  auto out = tpl->render(boost::json::parse(context));
  if (!out) return "ERROR: " + out.err().message;
  return *out;
}

TEST(chat_template, applies_trim_blocks_and_lstrip_blocks_like_jinja2) {
  EXPECT_EQ(render("  {% if true %}\n  yes\n  {% endif %}\nafter"), "  yes\nafter");
  EXPECT_EQ(render("{% for x in xs %}\n  {{ x }}\n{% endfor %}\n", R"({"xs": [1, 2]})"), "  1\n  2\n");
}

TEST(chat_template, strips_whitespace_at_dash_markers) {
  EXPECT_EQ(render("a\n  {%- if true %}\nb\n{% endif -%}\n  c"), "ab\nc");
  EXPECT_EQ(render("{{- '  a  ' -}}  \n  {{ 'b' }}"), "  a  b");
  EXPECT_EQ(render("x {#- note -#} y"), "xy");
}

TEST(chat_template, provides_every_loop_variable) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                   "{{ loop.first|int }}{{ loop.last|int }}{{ loop.length }}{{ loop.previtem|default('-') }}"
                   "{{ loop.nextitem|default('-') }} {% endfor %}"),
            "1032103-b 2121003ac 3210013b- ");
}

TEST(chat_template, filters_loops_and_honours_break_continue_and_else) {
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}"
                   "{% if x == 3 %}{% continue %}{% endif %}{{ x }}:{{ loop.index }}/{{ loop.length }} "
                   "{% else %}none{% endfor %}"),
            "1:1/5 5:3/5 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "b1a2");
}

TEST(chat_template, calls_macros_with_defaults_and_keywords) {
  EXPECT_EQ(render("{% macro tag(name, body='x', sep=': ') %}<{{ name }}{{ sep }}{{ body }}>{% endmacro %}"
                   "{{ tag('a') }}{{ tag('b', 'y') }}{{ tag('c', sep='=') }}"),
            "<a: x><b: y><c=x>");
}

TEST(chat_template, lets_loops_update_a_namespace) {
  EXPECT_EQ(render("{% set ns = namespace(n=0, seen=[]) %}{% for m in ['a', 'b', 'a'] %}{% set ns.n = ns.n + 1 %}"
                   "{% if m not in ns.seen %}{% set ns.seen = ns.seen + [m] %}{% endif %}{% endfor %}"
                   "{{ ns.n }} {{ ns.seen }}"),
            "3 ['a', 'b']");
  // A plain variable set inside a loop does not leak out of it.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
}

TEST(chat_template, slices_strings_by_code_point_and_lists_with_negative_steps) {
  EXPECT_EQ(render("{{ s[1:3] }}|{{ s[-3:] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-2] }}|"
                   "{{ l[-100:100] }}",
                   R"({"s": "añb€c", "l": [1, 2, 3, 4]})"),
            "ñb|b€c|c€bña|abc|[2, 3, 4]|[1, 2, 3]|[4, 2]|[1, 2, 3, 4]");
}

TEST(chat_template, dumps_json_in_input_key_order_without_html_escaping) {
  EXPECT_EQ(render("{{ d | tojson }}|{{ d | tojson(indent=2) }}", R"({"d": {"z": [1, 2.5, null], "a": "<é\"\n>"}})"),
            "{\"z\": [1, 2.5, null], \"a\": \"<é\\\"\\n>\"}|"
            "{\n  \"z\": [\n    1,\n    2.5,\n    null\n  ],\n  \"a\": \"<é\\\"\\n>\"\n}");
}

TEST(chat_template, prints_numbers_as_python_does) {
  EXPECT_EQ(render("{{ 0.1 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ -0.0 }} {{ 10 / 4 }} {{ 2 ** 62 }} "
                   "{{ 3.0 }} {{ 1/3 }}"),
            "0.1 1e+16 1000000000000000.0 1.5e-05 0.0001 -0.0 2.5 4611686018427387904 3.0 0.3333333333333333");
}

TEST(chat_template, prints_random_doubles_so_that_they_read_back_exactly) {
  const unsigned seed = strata::test_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mantissa(-10.0, 10.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  auto tpl = chat_template::parse("{{ x }}");
  ASSERT_TRUE(tpl);
  for (int i = 0; i < 2000; ++i) {
    double x = mantissa(rng) * std::pow(10.0, exponent(rng));
    boost::json::object ctx;
    ctx["x"] = x;
    auto out = tpl->render(ctx);
    ASSERT_TRUE(out) << "seed " << seed;
    EXPECT_EQ(std::strtod(out->c_str(), nullptr), x) << *out << " seed " << seed;
    // Python switches to exponent notation below 1e-4 and from 1e16 on, and always shows a
    // fraction or an exponent.
    bool exponent_form = out->find('e') != std::string::npos;
    EXPECT_EQ(exponent_form, std::fabs(x) < 1e-4 || std::fabs(x) >= 1e16) << *out << " seed " << seed;
    EXPECT_TRUE(exponent_form || out->find('.') != std::string::npos) << *out;
  }
}

TEST(chat_template, applies_string_and_sequence_filters) {
  EXPECT_EQ(render("{{ 'x' | upper }}{{ ' a ' | trim }}{{ ['b', 'a'] | sort | join(',') }}"
                   "{{ [1, 2, 3] | select('odd') | list }}"
                   "{{ [{'r': 'u'}, {'r': 'a'}] | selectattr('r', 'equalto', 'u') | list | length }}"
                   "{{ 'a\\nb' | indent(2) }}"),
            "Xaa,b[1, 3]1a\n  b");
}

TEST(chat_template, treats_undefined_values_like_jinja2) {
  EXPECT_EQ(render("{{ none }}|{{ x }}|{{ x is defined }}|{{ d.missing }}|{{ d.get('missing', 'dflt') }}", R"({"d": {}})"),
            "None||False||dflt");
  EXPECT_EQ(render("{{ x.y }}"), "ERROR: 'x' is undefined (template line 1)");
}

TEST(chat_template, turns_raise_exception_into_a_template_error_with_its_exact_message) {
  auto tpl = chat_template::parse("line one\n{% if messages | length == 0 %}{{ raise_exception('No messages: ' ~ 0) }}{% endif %}");
  ASSERT_TRUE(tpl);
  auto out = tpl->render_chat(boost::json::array{}, false, "<s>", "</s>");
  ASSERT_FALSE(out);
  EXPECT_EQ(out.err().code, errc::template_error);
  EXPECT_EQ(out.err().message, "No messages: 0");
}

TEST(chat_template, reports_syntax_errors_with_their_line) {
  auto tpl = chat_template::parse("ok\n{% if x %}\n\n{% endfor %}");
  ASSERT_FALSE(tpl);
  EXPECT_EQ(tpl.err().code, errc::template_error);
  EXPECT_NE(tpl.err().message.find("line 4"), std::string::npos) << tpl.err().message;
  EXPECT_FALSE(chat_template::parse("{{ x | no_such_filter }}"));
  EXPECT_FALSE(chat_template::parse("{% if x %}never closed"));
  EXPECT_FALSE(chat_template::parse("{{ 'unterminated }}"));
}

TEST(chat_template, stops_runaway_loops_output_and_recursion_with_an_error) {
  render_limits small;
  small.max_loop_iterations = 1000;
  small.max_output_bytes = 10000;
  small.max_call_depth = 20;
  EXPECT_NE(render("{% for i in range(100000) %}{% endfor %}", "{}", small).find("loop iterations"), std::string::npos);
  EXPECT_NE(render("{% for i in range(500) %}{{ 'x' * 100 }}{% endfor %}", "{}", small).find("output exceeded"),
            std::string::npos);
  EXPECT_NE(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", small).find("nested deeper"),
            std::string::npos);
  // Nested loops count every inner iteration.
  EXPECT_NE(render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}", small)
                .find("loop iterations"),
            std::string::npos);
  // Growing a string or a list in a loop copies it every time: a budget bounds that work.
  EXPECT_NE(render("{% set ns = namespace(s='') %}{% for i in range(200000) %}{% set ns.s = ns.s ~ 'xxxxxxxxxxxxxxxxxxxx' %}"
                   "{% endfor %}")
                .find("bytes of strings and lists"),
            std::string::npos);
  EXPECT_NE(render("{% set ns = namespace(l=[]) %}{% for i in range(200000) %}{% set ns.l = ns.l + [i] %}{% endfor %}")
                .find("bytes of strings and lists"),
            std::string::npos);
  // String doubling hits the size limit long before memory runs out.
  EXPECT_NE(render("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                   "{}", small)
                .find("too large"),
            std::string::npos);
}

TEST(chat_template, refuses_values_and_syntax_nested_too_deeply_instead_of_overflowing_the_stack) {
  EXPECT_NE(render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}ok")
                .find("nesting is too deep"),
            std::string::npos);
  std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_FALSE(chat_template::parse(parens));
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 5000; ++i) ifs += "{% endif %}";
  EXPECT_FALSE(chat_template::parse(ifs));
}

TEST(chat_template, renders_a_conversation_with_the_variables_apply_chat_template_sets) {
  auto tpl = chat_template::parse(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}[assistant]{% endif %}|{{ tools is none }}|{{ enable_thinking }}");
  ASSERT_TRUE(tpl);
  boost::json::array messages = {{{"role", "user"}, {"content", "Hi"}}};
  auto out = tpl->render_chat(messages, true, "<s>", "</s>", {{"enable_thinking", false}});
  ASSERT_TRUE(out) << out.err().message;
  EXPECT_EQ(*out, "<s>[user] Hi</s>[assistant]|True|False");
  out = tpl->render_chat(messages, false, "", "");
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "[user] Hi|True|");
}

TEST(chat_template, reads_strftime_now_from_the_injected_clock) {
  auto tpl = chat_template::parse("{{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(tpl);
  tpl->set_clock(strata::chat::testing::fixed_day);
  auto out = tpl->render(boost::json::object{});
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "15 Jan 2026");
}

TEST(chat_template, never_crashes_on_malformed_templates) {
  // Fragments of real templates spliced at random: every result must be a rendering or an error.
  const char* fragments[] = {"{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "if", "for", "in", "endif", "endfor",
                             "else", "elif", "set", "macro", "endmacro", "(", ")", "[", "]", "{", "}", ",", ":", "|",
                             ".", "=", "==", "'", "\"", "x", "messages", "loop", "ns", "namespace(a=1)", "1", "-1",
                             "not", "and", "or", "is", "defined", "none", "~", "+", "*", "//", "%", "tojson",
                             "raise_exception('e')", "range(9)", "\n", " ", "[::-1]", "call", "endcall", "break"};
  const unsigned seed = strata::test_seed();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(fragments) - 1);
  std::uniform_int_distribution<int> length(1, 40);
  render_limits limits;
  limits.max_loop_iterations = 10000;
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string source;
    for (int n = length(rng); n > 0; --n) source += std::string(fragments[pick(rng)]) + (rng() % 2 ? " " : "");
    auto tpl = chat_template::parse(source);
    if (!tpl) {
      EXPECT_EQ(tpl.err().code, errc::template_error) << "seed " << seed;
      continue;
    }
    ++parsed;
    tpl->set_limits(limits);
    auto out = tpl->render(boost::json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "x": [1, "a"]})"));
    if (!out) {
      EXPECT_FALSE(out.err().message.empty()) << "seed " << seed;
    }
  }
  EXPECT_GT(parsed, 0) << "seed " << seed;
}

}  // namespace
