// Unit tests of the chat-template interpreter's pieces. The expected strings are what Jinja
// (and @huggingface/jinja, checked in parity_test.cpp) produce for these inputs.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_text.h"

using pypto::ChatTemplate;
using J = nlohmann::ordered_json;

namespace {

std::string render(const std::string& source, const J& context = J::object()) {
  return ChatTemplate::parse(source)->render(context);
}

// The message of the pypto::Error that parse() throws for `source` ("" when none).
std::string parse_error(const std::string& source) {
  try {
    ChatTemplate::parse(source);
  } catch (const pypto::Error& e) {
    return e.what();
  }
  return "";
}

std::string render_error(const std::string& source, const J& context = J::object()) {
  try {
    render(source, context);
  } catch (const pypto::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ChatTemplateParse, UnsupportedConstructsFailAtParseNamingThemAndTheLine) {
  EXPECT_EQ(parse_error("{{ x | frobnicate }}"), "chat template line 1: unsupported filter 'frobnicate'");
  EXPECT_EQ(parse_error("a\n{% if x %}\n{{ x is prime }}\n{% endif %}"), "chat template line 3: unsupported test 'is prime'");
  EXPECT_EQ(parse_error("\n\n{{ s.casefold() }}"), "chat template line 3: unsupported method 'casefold()'");
  EXPECT_EQ(parse_error("{% include 'other.jinja' %}"), "chat template line 1: unsupported statement 'include'");
  EXPECT_EQ(parse_error("x\n{{ lipsum(2) }}"), "chat template line 2: unsupported function 'lipsum()'");
  EXPECT_EQ(parse_error("{{ x | trim(1) }}"), "chat template line 1: unsupported filter 'trim(...)'");
  EXPECT_EQ(parse_error("{{ x | tojson(sort_keys=true) }}"),
            "chat template line 1: unsupported filter argument tojson(sort_keys=...)");
  EXPECT_EQ(parse_error("{% set x[0] = 1 %}"),
            "chat template line 1: unsupported assignment target in 'set' (use a name, a tuple of names or "
            "namespace.attr)");
  EXPECT_NE(parse_error("{% if x %}never closed").find("missing {% endif %}"), std::string::npos);
  EXPECT_NE(parse_error("{{ 'unterminated }}").find("Unexpected end of input"), std::string::npos);
  EXPECT_NE(parse_error("{{ x ! y }}").find("Unexpected character: !"), std::string::npos);
  // Macros, their parameters and caller() are callable; so are the built-in functions.
  EXPECT_EQ(parse_error("{% macro m(f) %}{{ f() }}{{ caller() }}{% endmacro %}{{ m(range) }}{{ namespace() }}"), "");
}

TEST(ChatTemplateParse, HostileNestingIsAnErrorNotACrash) {
  EXPECT_NE(parse_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(parse_error("{{ " + std::string(5000, '-') + "x }}").find("nested too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if true %}";
  EXPECT_NE(parse_error(ifs).find("nested too deeply"), std::string::npos);
  EXPECT_NE(render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}")
                .find("nested more than"),
            std::string::npos);
  // A namespace holding itself: printing fails cleanly, and the cycle is not leaked.
  EXPECT_NE(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("too deeply"),
            std::string::npos);
}

TEST(ChatTemplateRender, RuntimeErrorsCarryTheMessage) {
  EXPECT_EQ(render_error("{{ raise_exception('Conversation roles must alternate') }}"),
            "Conversation roles must alternate");
  EXPECT_EQ(render_error("ok\n{{ 1 + none }}"), "chat template line 2: Cannot perform operation on null values");
  EXPECT_EQ(render_error("{{ x.upper() }}"),
            "chat template line 1: Cannot call something that is not a function: got UndefinedValue");
  EXPECT_EQ(render_error("{{ 1 }}", J{{"true", 1}}), "chat template: Variable already declared: true");
}

TEST(ChatTemplateRender, WhitespaceControlMatchesTheOracleDefaults) {
  // trim_blocks and lstrip_blocks are on; one trailing newline is dropped.
  EXPECT_EQ(render("a\n  {% if true %}\n    x\n  {% endif %}\nb\n"), "a\n    x\nb");
  EXPECT_EQ(render("a  {%- if true -%}  x  {%- endif -%}  b"), "axb");
  EXPECT_EQ(render("{{ 'x' }}\n{{ 'y' }}\n"), "x\ny");
  EXPECT_EQ(render("a {#- c -#} b"), "ab");
  EXPECT_EQ(render("{{- ' a ' -}}   \n  {{ 'b' }}"), " a b");
}

TEST(ChatTemplateRender, Filters) {
  const J ctx = J::parse(R"({"s": "  Hi \u3000", "e": "😀é", "l": [3, 1, 2], "d": {"b": 1, "a": [1, 2]}})");
  EXPECT_EQ(render("[{{ s | trim }}]", ctx), "[Hi]");  // JS trim: Unicode spaces too
  EXPECT_EQ(render("{{ e | length }}", ctx), "3");     // UTF-16 code units, as in JS
  EXPECT_EQ(render("{{ l | join(', ') }} {{ l | first }} {{ l | last }} {{ l | length }}", ctx), "3, 1, 2 3 2 3");
  EXPECT_EQ(render("{{ d | tojson }}", ctx), R"({"b": 1, "a": [1, 2]})");
  EXPECT_EQ(render("{{ d | tojson(indent=2) }}", ctx), "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}");
  EXPECT_EQ(render("{{ e | tojson }} {{ e | tojson(ensure_ascii=true) }}", ctx), "\"😀é\" \"\\ud83d\\ude00\\u00e9\"");
  EXPECT_EQ(render("{{ x | default('none') }} {{ '' | default('e', true) }}", ctx), "none e");
  EXPECT_EQ(render("{{ 'abc' | upper }} {{ 2.0 | string }} {{ d | items }}", ctx), R"(ABC 2.0 [["b", 1], ["a", [1, 2]]])");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", ctx), "b=1;a=[1, 2];");
}

TEST(ChatTemplateRender, MethodsFollowTheOracle) {
  // lstrip/rstrip/strip ignore their argument and strip all whitespace (as the oracle does).
  EXPECT_EQ(render("[{{ '\n\n x \n'.lstrip('\n') }}]"), "[x \n]");
  EXPECT_EQ(render("{{ 'a</think>b</think>c'.split('</think>')[-1] }}"), "c");
  EXPECT_EQ(render("{{ 'a,b,c'.split(',', 1) }} {{ ' a  b '.split() }}"), R"(["a", "b,c"] ["a", "b"])");
  EXPECT_EQ(render("{{ 'xyz'.startswith('xy') }} {{ 'xyz'.endswith(('q', 'z')) }}"), "true true");
  EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b', 2) }}"), "bba");
}

TEST(ChatTemplateRender, Slicing) {
  const J ctx = J::parse(R"({"l": [1, 2, 3, 4], "s": "añb😀"})");
  EXPECT_EQ(render("{{ l[::-1] }} {{ l[1:3] }} {{ l[-2:] }} {{ l[:-1] }} {{ l[::2] }} {{ l[-1] }}", ctx),
            "[4, 3, 2, 1] [2, 3] [3, 4] [1, 2, 3] [1, 3] 4");
  EXPECT_EQ(render("{{ s[::-1] }} {{ s[1:3] }}", ctx), "😀bña ñb");  // slices go by code point
  EXPECT_EQ(render("[{{ l[10] }}]", ctx), "[]");
}

TEST(ChatTemplateRender, LoopVariablesAndScopes) {
  const J ctx = J::parse(R"({"l": ["a", "b", "c"]})");
  EXPECT_EQ(render("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }};{% endfor %}",
                   ctx),
            "103truefalse3;212falsefalse3;321falsetrue3;");
  EXPECT_EQ(render("{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}", ctx), "-b a-c b- ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in l if x != 'b' %}{{ x }}{{ loop.index }}{% endfor %}", ctx), "a1c2");
  // `set` in a loop stays in the loop; namespaces carry values out.
  EXPECT_EQ(render("{% set v = 0 %}{% for x in l %}{% set v = x %}{% endfor %}{{ v }}", ctx), "0");
  EXPECT_EQ(render("{% set ns = namespace(v=0) %}{% for x in l %}{% set ns.v = x %}{% endfor %}{{ ns.v }}", ctx), "c");
  EXPECT_EQ(render("{% for x in l %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}", ctx), "a");
}

TEST(ChatTemplateRender, Macros) {
  EXPECT_EQ(render("{% macro g(n, p='Hi') %}{{ p }} {{ n }}{% endmacro %}{{ g('A') }}/{{ g('B', p='Yo') }}"), "Hi A/Yo B");
}

TEST(ChatTemplateRender, ContextKeyOrderAndNumbersFollowJavaScript) {
  // JSON.parse puts integer-like keys first; integral floats are integers; -0 prints as 0.
  const J ctx = J::parse(R"({"d": {"b": 1, "10": 2, "2": 3, "a": 1.0, "z": -0.0, "big": 1e21, "f": 0.5}})");
  EXPECT_EQ(render("{{ d | tojson }}", ctx), R"({"2": 3, "10": 2, "b": 1, "a": 1, "z": 0, "big": 1e+21, "f": 0.5})");
  // The nlohmann::json overload works too (its objects are sorted by key).
  nlohmann::json plain = {{"messages", nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}})}};
  EXPECT_EQ(ChatTemplate::parse("{{ messages[0].content }}")->render(plain), "hi");
}

TEST(ChatTemplateRender, ConcurrentRendersOfOneTemplate) {
  auto t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content | trim }}{% endfor %}{{ ns.n }}");
  J ctx;
  ctx["messages"] = J::array();
  for (int i = 0; i < 50; ++i) ctx["messages"].push_back(J{{"role", "user"}, {"content", " m" + std::to_string(i)}});
  const std::string expected = t->render(ctx);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) ok[k] += t->render(ctx) == expected;
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(ok[k], 200);
}

TEST(JinjaText, JavaScriptNumberFormatting) {
  using pypto::jinja::js_number_to_string;
  EXPECT_EQ(js_number_to_string(1), "1");
  EXPECT_EQ(js_number_to_string(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(js_number_to_string(1e21), "1e+21");
  EXPECT_EQ(js_number_to_string(123456789012345680000.0), "123456789012345680000");
  EXPECT_EQ(js_number_to_string(1.5e-7), "1.5e-7");
  EXPECT_EQ(js_number_to_string(0.000001), "0.000001");
  EXPECT_EQ(js_number_to_string(-2.5), "-2.5");
  EXPECT_EQ(js_number_to_string(-0.0), "0");
}
