#include "chat_template/snippets.h"

namespace pypto::test {

std::vector<std::pair<std::string, std::string>> feature_snippets() {
  const std::vector<std::string> sources = {
      // whitespace control, trim_blocks / lstrip_blocks as the oracle applies them
      "a\n  {% if true %}\n    x\n  {% endif %}\nb\n",
      "a  {%- if true -%}  x  {%- endif -%}  b",
      "{{ 'x' }}\n{{ 'y' }}\n",
      "  {# comment #}\nline",
      "a {#- c -#} b {# keep #} c",
      "{%- for i in lst %}\n{{ i }}\n{% endfor %}",
      "x\n\n",
      "\t{% set a = 1 %}\n{{a}}",
      "{{- ' a ' -}}   \n  {{ 'b' }}",
      "{% generation %}gen{% endgeneration %}",
      "a  {%- generation -%}  b  {% endgeneration %}  c",
      "{% if true %}\r\n  x{% endif %}\n   {%- if true %} y {% endif -%}\n\n z",
      // literals and strings
      "{{ 'a' 'b' \"c\" }}",
      R"J({{ '\n\t\\ \'q\' \x41 \u00e9 \ud83d\ude00' }})J",
      "{{ 1 }} {{ 1.5 }} {{ -2 }} {{ 3.0 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}",
      "{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 100000000000000000000 * 10 }} {{ 4 / 2 }}",
      "{{ n + f }} {{ n * 2 }} {{ n - 10 }} {{ f * 2 }} {{ 1 + 2 * 3 - 4 / 2 }}",
      "{{ 'a' ~ 1 ~ 2.0 ~ true ~ lst ~ d }}",
      "{{ 'a' + 1 }} {{ 1 + 'a' }} {{ 'f' + f }} {{ 'l' + lst }}",
      "{{ lst + [4] }} {{ [] + [] }}",
      "{{ nul }}|{{ undefined_var }}|{{ b }}|{{ d }}|{{ lst }}|{{ f }}|{{ 2.0 }}|{{ people }}",
      // comparisons, membership, logic
      "{{ 1 == 1.0 }} {{ '1' == 1 }} {{ true == 1 }} {{ nul == undefined_thing }} {{ lst == lst }} "
      "{{ [1] == [1] }} {{ 'a' != 'b' }} {{ '' == 0 }} {{ [1, 2] == '1,2' }} {{ d == '[object Map]' }}",
      "{{ 1 < 2 }} {{ 2 >= 2.0 }} {{ f > n }} {{ n <= 7 }}",
      "{{ 'a' < 'b' }}",
      "{{ 'ell' in s }} {{ 'x' not in s }} {{ 2 in lst }} {{ '2' in lst }} {{ 'a' in d }} {{ 'q' in undefined_var }} "
      "{{ 'z' not in nul2 }}",
      "{{ 1 in 'abc' }}",
      "{{ lst and 'yes' }} {{ empty or 'fallback' }} {{ not empty }} {{ not not b }} {{ z or nul }}|",
      "{{ 'x' if b else 'y' }} {{ 'x' if z }}|{{ 'a' if false else 'b' if false else 'c' }}",
      // tests
      "{{ n is odd }} {{ n is even }} {{ s is string }} {{ lst is iterable }} {{ d is mapping }} {{ d is sequence }} "
      "{{ nul is none }} {{ x is defined }} {{ x is undefined }} {{ b is boolean }} {{ f is number }} "
      "{{ n is integer }} {{ f is integer }} {{ b is true }} {{ z is false }} {{ 'abc' is lower }} "
      "{{ 'ABC' is upper }} {{ namespace is callable }} {{ (1, 2) is iterable }} {{ s is not string }} "
      "{{ s is iterable }} {{ n is sequence }}",
      "{{ f is odd }}",
      // filters
      "{{ s | trim }}|{{ s | length }}|{{ u | length }}|{{ u | upper }}|{{ u | lower }}|"
      "{{ 'hello world_x y3z' | title }}|{{ 'élan vital' | capitalize }}|{{ 'straße' | upper }}",
      "{{ lst | first }} {{ lst | last }} {{ lst | length }} {{ lst | reverse }} {{ lst | sort }} {{ lst | list }}",
      "{{ words | sort }} {{ words | sort(reverse=true) }} {{ words | sort(case_sensitive=true) }} {{ words | sort(true) }}",
      "{{ lst | join }} {{ lst | join(', ') }} {{ u | join('-') }} {{ lst | string }} {{ [1, 1, 2, 'a', 'a', nul, nul] | unique }}",
      "{{ [1, nul, 'x', [2, 3], 2.0] | join('|') }}",
      "{{ people | map(attribute='name') | join(',') }} {{ people | selectattr('admin') | length }} "
      "{{ people | rejectattr('admin') | map(attribute='name') | first }} "
      "{{ people | sort(attribute='age') | map(attribute='name') | join }} "
      "{{ people | selectattr('name', 'equalto', 'bob') | length }} "
      "{{ people | map(attribute='missing', default='?') | join }}",
      "{{ d | items }} {{ d | length }} {{ d | dictsort }} {{ d.keys() }} {{ d.values() }} {{ d.items() }}",
      "{{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {{ d | dictsort(reverse=true) }}",
      "{{ d | tojson }}",
      "{{ d | tojson(indent=2) }}",
      "{{ lst | tojson(indent=4) }}",
      "{{ u | tojson }} {{ u | tojson(ensure_ascii=true) }}",
      "{{ d | tojson(separators=(',', ':')) }} {{ d | tojson(indent=1, separators=[';', '=']) }}",
      "{{ {'k': [1, {'z': nul}], 'e': [], 'o': {}} | tojson(indent=2) }}",
      R"J({{ 'quote" back\\ nl
 ctl\x01 del' | tojson }})J",
      "{{ f | tojson }} {{ 3.0 | tojson }} {{ b | tojson }} {{ nul | tojson }} {{ undefined_x | tojson }} "
      "{{ people | tojson }} {{ (1, 2) | tojson }}",
      "{{ n | string }} {{ f | string }} {{ 2.0 | string }} {{ b | string }} {{ '42abc' | int }} {{ 'x' | int }} "
      "{{ ' 3.5e2x' | float }} {{ f | int }} {{ neg | abs }} {{ 'x' | int(7) }} {{ b | int }} {{ lst | string }}",
      "{{ undefined_x | default('dflt') }} {{ '' | default('e', true) }} {{ s | default('no') }} {{ nul | default('n') }}",
      "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb\n\nc' | indent(2, true) }}|{{ 'a\nb\n\nc' | indent(2, first=true, blank=true) }}",
      "{{ s | replace('l', 'L') }} {{ s | replace('l', 'L', 1) }} {{ 'abc' | replace('', '-') }} {{ u | replace('', '.', 3) }}",
      "{% filter upper %}inside {{ s }}{% endfilter %}",
      "{{ d | safe }} {{ s | string | trim | length }}",
      "{{ nul | length }}",
      "{{ lst | items }}",
      "{{ d | string }}",
      // methods
      "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ '\n\n x \n'.lstrip('\n') }}|{{ s.upper() }}|"
      "{{ s.lower() }}|{{ s.title() }}|{{ s.capitalize() }}|{{ '\u3000 x \u00a0'.strip() }}|",
      "{{ s.startswith('  He') }} {{ s.endswith('! ') }} {{ s.startswith(('x', '  H')) }} {{ s.endswith(['!']) }}",
      "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ ' a b c '.split(none, 1) }} "
      "{{ 'a b c'.split(' ', -2) }} {{ 'a,b'.split(',', 0) }}",
      "{{ s.replace('o', '0') }} {{ s.replace('o', '0', count=1) }} {{ s.replace('o', '0', 0) }}",
      "{{ u.split('') }}",
      "{{ s.length }} {{ lst.length }} {{ u[0] }} {{ u[-1] }} {{ u[12] }} {{ u[100] }}|{{ d.length }}|",
      "{{ s.nonexistent }}|{{ n.foo }}|{{ nul.foo }}|{{ undefined_x.foo }}|{{ lst.foo }}",
      // slicing
      "{{ lst[1:] }} {{ lst[:2] }} {{ lst[::-1] }} {{ lst[-2:] }} {{ lst[::2] }} {{ lst[5:] }} {{ lst[-10:1] }} "
      "{{ lst[2:0:-1] }} {{ lst[::0] }} {{ lst[1] }} {{ lst[-1] }} {{ lst[9] }}|",
      "{{ u[::-1] }} {{ u[2:5] }} {{ s[-3:] }} {{ u[-2:] }}",
      "{{ lst[1.5] }}",
      // loops
      "{% for x in lst %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/"
      "{{ loop.last }}/{{ loop.length }}/{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}",
      "{% for x in empty %}x{% else %}none{% endfor %}|{% for x in lst %}{{ x }}{% else %}none{% endfor %}",
      "{% for k in d %}{{ k }},{% endfor %}|{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}|"
      "{% for k, v in d.items() %}{{ k }}{% endfor %}",
      "{% for x in lst if x > 1 %}{{ x }}{{ loop.index }}{{ loop.length }}{% endfor %}|"
      "{% for k in d if k != 'a' %}{{ k }}{% endfor %}",
      "{% for x in lst %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}|"
      "{% for x in lst %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% endfor %}",
      "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}",
      "{% set x = 1 %}{% for i in lst %}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
      "{% set ns = namespace(c=0) %}{% for i in lst %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}",
      "{% for i in s %}{{ i }}{% endfor %}",
      "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}",
      "{% for a, b in [[1, 2], [3]] %}{{ a }}{% endfor %}",
      "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}"
      "{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}",
      "{% for m in msgs %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}",
      // assignment and scope
      "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
      "{% set blk %}inside {{ n }}{% endset %}[{{ blk }}]",
      "{% set x = [1, 2] %}{% set y = {'k': x, 'n': none, 'b': True} %}{{ y }}",
      "{% if true %}{% set inner = 5 %}{% endif %}{{ inner }}",
      "{% set d2 = {} %}{% set d2.x = 1 %}",
      "{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }}{{ ns }}{{ ns.missing }}",
      "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns | tojson }}",
      // macros
      "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
      "{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(name='Cy', greeting='Yo') }}",
      "{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, a=3) }}",
      "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
      "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}body {{ n }}{% endcall %}",
      "{% macro show() %}{{ v }}{% endmacro %}{% set v = 'global' %}{{ show() }}"
      "{% for v in ['loop'] %}{{ show() }}{% endfor %}",
      "{% macro hi(x) %}hi {{ x }}{% endmacro %}{% set f = hi %}{{ f('a') }}"
      "{% for g in [hi] %}{{ g('b') }}{% endfor %}",
      "{% macro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(4) }}",
      // errors and odd corners
      "{% if n > 5 %}{{ raise_exception('n too big: ' ~ n) }}{% endif %}ok",
      "{{ undefined_x + 1 }}",
      "{{ nul ~ 'a' }}",
      "{{ -n }} {{ -f }} {{ +b }} {{ - - n }} {{ -(2) }}",
      "{{ (1, 2) }}",
      "{{ [1, 2, 3][1] }} {{ {'a': 1}['a'] }} {{ {'a': {'b': 2}}.a.b }} {{ d.c.x }} {{ d['c']['x'] }} {{ d.a.1 }}",
      "{{ lst | length > 2 }} {{ 2 * 3 is odd }}",
      "{{ 'x' * 3 }}",
      "{{ '\u3000 x \u00a0' | trim }}|{{ 'a\u2028b' }}",
      "{{ strftime_now('%Y') | length }}",
      "{{ range(5) | join(',') }} {{ lst | sort | first }}",
      "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('|') }}",
      "{{ msgs[0]['role'] }} {{ msgs[-1].content | trim }} {{ msgs | length }}",
      "{{ n.x() }}",
      "{{ true }} {{ True }} {{ none }} {{ None }}|",
      "{{ 'ΟΔΟΣ ΣΑΣ Σ aΣ.b AΣ\\'s ΑΣ' | lower }}|{{ 'ǅ ǈ ŉ ﬁ ΐ' | upper }}|{{ 'ǅ' | lower }}",
      "{{ 'a %}\nb' }}|{{ 'x #}\ny' }}|{{ '{# not a comment #}' }}|{{ \"{{ '}}' }}\" }}",
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < sources.size(); ++i) out.emplace_back("snippet " + std::to_string(i), sources[i]);
  return out;
}

std::vector<nlohmann::ordered_json> feature_contexts() {
  using J = nlohmann::ordered_json;
  return {
      J::parse(R"({"s": "  Hello, World! ", "u": "héllo wörld 你好 😀", "n": 7, "f": 2.5, "neg": -3, "z": 0,
        "b": true, "nul": null, "lst": [3, 1, 2], "words": ["b", "A", "c", "a"],
        "d": {"b": 1, "a": [1, 2], "c": {"x": "y"}}, "empty": [], "edict": {},
        "people": [{"name": "Ann", "age": 30, "admin": true}, {"name": "bob", "age": 25}],
        "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": " hi "},
                 {"role": "assistant", "content": "yo"}, {"role": "user", "content": " bye\n"}]})"),
      J::parse(R"({"s": "", "u": "a", "n": 2, "f": -0.5, "neg": 4, "z": 1.0, "b": false, "nul": null,
        "lst": [1], "words": [], "d": {"2": "two", "a": null, "10": [], "c": {}}, "empty": [0],
        "people": [], "msgs": [{"role": "user", "content": "only"}]})"),
  };
}

}  // namespace pypto::test
