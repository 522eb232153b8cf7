#!/usr/bin/env python3
"""Writes features.json: small templates, one per Jinja feature, rendered by Python jinja2 set up
the way Hugging Face's apply_chat_template sets it up (immutable sandbox, trim_blocks,
lstrip_blocks, loop controls, raise_exception, strftime_now, json.dumps-based tojson).

Each case is {"template", "context"} plus one of:
  "text"          the rendering;
  "error", "raised"  rendering failed with this message; "raised" is true when the template
                  itself called raise_exception (then the message must match exactly);
  "syntax_error"  the template does not parse.

Run: python3 tests/templates/make_features.py > tests/templates/features.json
"""

import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


class RaisedByTemplate(Exception):
    pass


def raise_exception(message):
    raise RaisedByTemplate(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime(2026, 1, 15, 12, 0, 0).strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": "x"}}}]},
    {"role": "user", "content": "  padded\n"},
]

CASES = [
    # Text, comments, whitespace control, trim_blocks and lstrip_blocks.
    ("plain text only", {}),
    ("a {# comment #} b", {}),
    ("a\n  {# comment #}\nb", {}),
    ("a  {#- comment -#}  b", {}),
    ("{{ 'x' }}\n{{ 'y' }}\n", {}),
    ("{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("  {% if true %}\n  yes\n  {% endif %}\nafter", {}),
    ("  {%+ if true %}\n  yes\n  {%+ endif %}\nafter", {}),
    ("a   {%- if true -%}   b   {%- endif -%}   c", {}),
    ("a\n\n{{- 'b' -}}\n\nc", {}),
    ("x {%- if true %} y {% endif -%} z", {}),
    ("{% if true -%}\n\n  yes  \n{%- endif %}", {}),
    ("line1\n    {% for i in [1,2] %}\n    item {{ i }}\n    {% endfor %}\nend\n", {}),
    ("{% for i in [1,2] %}{{ i }}{% endfor %}\n\n", {}),
    ("  {{ 'expr keeps indent' }}\n", {}),
    ("a {% if true %}\r\nb{% endif %}", {}),
    ("{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("{%- raw -%}  {{ x }}  {%- endraw -%}", {}),
    # Literals and printing.
    ("{{ 1 }} {{ -3 }} {{ 1.5 }} {{ 2.0 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 1_000 }}", {}),
    ("{{ none }} {{ None }} {{ true }} {{ True }} {{ false }} {{ False }}", {}),
    ("{{ [1, 'a', none, true, 2.5] }}", {}),
    ("{{ {'a': 1, 'b': [1, 2], 'c': none} }}", {}),
    ("{{ (1, 2) }} {{ (1,) }} {{ () }}", {}),
    ("{{ 'it\\'s' }} {{ \"dq\" }} {{ 'tab\\tnl\\n' }} {{ 'uni\\u00e9' }}", {}),
    ("{{ ['it\\'s', \"q\\\"\"] }}", {}),
    ("{{ 1 / 3 }} {{ 10 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1e20 }} {{ 1e-7 }} {{ 123456789.0 * 1000000000 }}", {}),
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }}", {}),
    ("{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 * 'ab' }} {{ [1] * 3 }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ true }} {{ 'a' + 'b' }} {{ [1] + [2] }}", {}),
    ("{{ 'x' ~ undefined_var ~ 'y' }}", {}),
    ("{{ 3 > 2 > 1 }} {{ 1 < 2 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1,2] == [1,2] }} {{ 1 != 2 }}", {}),
    ("{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ not 'x' in 'y' }}", {}),
    ("{{ 1 and 'x' }} {{ 0 and 'x' }} {{ 0 or '' }} {{ none or 'd' }} {{ not [] }} {{ not 0.0 }}", {}),
    ("{{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }} [{{ 'only' if false }}]", {"x": [0], "y": {}}),
    ("{{ 1 if false else 2 if false else 3 }}", {}),
    # Variables and undefined.
    ("[{{ missing }}] [{{ missing is defined }}] [{{ missing is undefined }}]", {}),
    ("[{{ obj.missing }}] [{{ obj['missing'] }}] [{{ obj.missing is defined }}]", {"obj": {"a": 1}}),
    ("{{ missing.attr }}", {}),
    ("{{ missing + 1 }}", {}),
    ("{% for x in missing %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("{% if missing %}t{% else %}f{% endif %} {{ missing | default('dflt') }} {{ '' | default('e', true) }} {{ none | d('n') }}", {}),
    ("{{ missing | length }}", {}),
    ("{{ x.a.b }} {{ x['a']['b'] }} {{ x.a['b'] }} {{ x.l[1] }} {{ x.l[-1] }}", {"x": {"a": {"b": 7}, "l": [1, 2, 3]}}),
    ("{{ x.l[5] }}|{{ x.l[5] is defined }}", {"x": {"l": [1]}}),
    ("{{ s[0] }}{{ s[-1] }} {{ s | length }}", {"s": "héllo😀"}),
    # Slicing.
    ("{{ l[1:] }} {{ l[:2] }} {{ l[-2:] }} {{ l[::2] }} {{ l[::-1] }} {{ l[1:-1] }} {{ l[5:] }} {{ l[-10:2] }} {{ l[3:1:-1] }}", {"l": [1, 2, 3, 4, 5]}),
    ("{{ s[1:] }} {{ s[:-1] }} {{ s[::-1] }} {{ s[2:4] }} {{ s[::3] }}", {"s": "héllo wörld"}),
    ("{{ l[::0] }}", {"l": [1, 2]}),
    # if / elif / else.
    ("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}", {"a": 0, "b": "", "c": [1]}),
    ("{% if a %}A{% elif b %}B{% else %}D{% endif %}", {"a": 0, "b": 0}),
    ("{% if a is none %}none{% endif %}{% if a is not none %}x{% endif %}", {"a": None}),
    # for loops.
    ("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {"l": ["a", "b", "c"]}),
    ("{% for x in l %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {"l": [1, 2, 3]}),
    ("{% for x in l %}{{ loop.cycle('odd', 'even') }} {% endfor %}", {"l": [1, 2, 3]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("{% for k in d %}{{ k }}{% endfor %} {% for v in d.values() %}{{ v }}{% endfor %} {{ d.keys() | list }}", {"d": {"z": 1, "a": 2}}),
    ("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}{% for (a, b) in [(5, 6)] %}{{ a * b }}{% endfor %}", {}),
    ("{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}", {}),
    ("{% for c in 'héy' %}{{ c }}.{% endfor %}", {}),
    ("{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("{% for x in l if x % 2 %}{{ x }}{{ loop.index }}{{ loop.length }} {% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("{% for x in l if x > 10 %}{{ x }}{% else %}none{% endfor %}", {"l": [1, 2]}),
    ("{% for x in l %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", {"l": [1, 2, 3, 4]}),
    ("{% for x in l %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("{% for x in [1, 2] %}{% for y in 'ab' %}{{ x }}{{ y }}{{ loop.index }}-{% endfor %}{{ loop.index }} {% endfor %}", {}),
    ("{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}", {}),
    ("{% for i in range(3) %}{{ i }}{% endfor %} {{ range(2, 8, 2) | list }} {{ range(5, 0, -2) | list }}", {}),
    ("{% for x in l %}{{ x }}{% endfor %}", {"l": 5}),
    ("{% for m in messages %}{{ m.role }}:{{ m['content'] | trim }}{% if not loop.last %}|{% endif %}{% endfor %}", {"messages": MSGS}),
    # set.
    ("{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}", {}),
    ("{% set t = 1, 2 %}{{ t }}", {}),
    ("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]", {}),
    ("{% set block | upper | trim %}  shout  {% endset %}[{{ block }}]", {}),
    ("{% if true %}{% set leaked = 'yes' %}{% endif %}{{ leaked }}", {}),
    ("{% set x = 1 %}{% set x = x + 1 %}{{ x }}", {}),
    # namespace.
    ("{% set ns = namespace(count=0, found=false) %}{% for i in [1,2,3] %}{% set ns.count = ns.count + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", {}),
    ("{% set ns = namespace() %}{% set ns.items = [] %}{% set ns.items = ns.items + ['a'] %}{{ ns.items }}", {}),
    ("{% set ns = namespace(a=1) %}{{ ns.b }}|{{ ns.b is defined }}|{{ ns['a'] }}", {}),
    ("{% set d = {'a': 1} %}{% set d.a = 2 %}", {}),
    ("{% set ns = namespace({'x': 1}, y=2) %}{{ ns.x }}{{ ns.y }}", {}),
    # Macros.
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(name='Cy', punct='.') }}", {}),
    ("{% macro m(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacro %}{{ m(1) }}", {}),
    ("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", {}),
    ("{% macro outer(x) %}<{{ caller(x) }}>{% endmacro %}{% call(v) outer(5) %}got {{ v }}{% endcall %}", {}),
    ("{% macro render(msg) %}{{ msg.role | upper }}: {{ msg.content }}\n{% endmacro %}{% for m in messages %}{{ render(m) }}{% endfor %}", {"messages": MSGS[:2]}),
    ("{% set g = 'global' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", {}),
    ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    # Filters on strings.
    ("{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ 'hello WORLD' | capitalize }}|{{ 'hello big-world it\\'s' | title }}", {}),
    ("{{ 'a-b-a' | replace('a', 'X') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'abc' | length }} {{ 'abc' | count }} {{ 'abc' | first }}{{ 'abc' | last }}", {}),
    ("{{ 'abc' | list }} {{ 'cba' | sort | join }} {{ 'abc' | reverse }} {{ 'aXbA' | unique | list }}", {}),
    ("{{ 'line1\\nline2\\n\\nline4' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\nb' | indent('> ', first=true, blank=true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}", {}),
    ("{{ 42 | string }}{{ [1, 'a'] | string }} {{ '12' | int + 1 }} {{ '3.5' | float }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '0x1A' | int(0, 16) }} {{ 5 | float }}", {}),
    ("{{ -3 | abs }} {{ (-3) | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 3.14159 | round(2) }} {{ 3.7 | round(0, 'floor') }} {{ 3.2 | round(0, 'ceil') }} {{ 7 | round }}", {}),
    ("{{ '<b>&\"' | safe }} {{ '<b>' | e }} {{ '<b>&\\'\"' | escape }}", {}),
    ("{{ '%s is %d years' | format('Ann', 30) }} {{ 'x=%.2f' | format(3.14159) }}", {}),
    ("{{ 'hello world foo' | wordcount }} {{ 'abc' | center(9) }}|", {}),
    # Filters on sequences.
    ("{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}", {}),
    ("{{ users | sort(attribute='age') | map(attribute='name') | join(', ') }}", {"users": [{"name": "a", "age": 30}, {"name": "b", "age": 20}, {"name": "c", "age": 25}]}),
    ("{{ users | map(attribute='name') | list }} {{ users | map(attribute='nick', default='?') | list }} {{ ['a','b'] | map('upper') | list }}", {"users": [{"name": "a", "nick": "A"}, {"name": "b"}]}),
    ("{{ [1, 2, 3, 4] | select('even') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ [0, 1, '', 'a', none] | select | list }} {{ [1, 5, 9] | select('gt', 4) | list }}", {}),
    ("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ messages | rejectattr('role', 'eq', 'user') | list | length }} {{ messages | selectattr('tool_calls') | list | length }} {{ messages | selectattr('tool_calls', 'defined') | list | length }}", {"messages": MSGS}),
    ("{{ [1, 2, 2, 3, 1] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ [1, 2, 3] | reverse | list }} {{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }} {{ [[1], [2]] | sum(start=[]) }}", {}),
    ("{{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ ['b', 'A', 'c'] | max }} {{ [] | first }}|{{ [1, 2] | first }}{{ [1, 2] | last }} {{ [1, 2] | length }} {{ {'a': 1} | length }}", {}),
    ("{{ [1, 2, 3] | join }} {{ [1, 2, 3] | join('-') }} {{ users | join(', ', attribute='name') }}", {"users": [{"name": "a"}, {"name": "b"}]}),
    ("{{ d | items | list }} {{ d | dictsort }} {{ d | dictsort(reverse=true) }} {{ d | dictsort(by='value') }}", {"d": {"b": 2, "a": 3, "C": 1}}),
    ("{% for row in [1, 2, 3, 4, 5] | batch(2, 'x') %}{{ row }}{% endfor %} {{ [1, 2, 3] | batch(2) | list }}", {}),
    ("{{ [1, 2, 3] | map('string') | join('|') }} {{ ['1', '2'] | map('int') | sum }}", {}),
    # tojson.
    ("{{ d | tojson }}", {"d": {"b": 1, "a": [1, 2.5, None, True, "x"], "s": "<tag> & 'q' \"dq\" é 😀 \\ \n"}}),
    ("{{ d | tojson(indent=2) }}", {"d": {"b": 1, "a": [1, {"c": []}, {}], "e": "x"}}),
    ("{{ d | tojson(indent=4) }}\n{{ [] | tojson(indent=2) }} {{ {} | tojson(indent=2) }}", {"d": {"k": [1, [2, 3]]}}),
    ("{{ 'x' | tojson }} {{ 1.5 | tojson }} {{ 1.0 | tojson }} {{ none | tojson }} {{ true | tojson }} {{ 12345678901234 | tojson }}", {}),
    ("{{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }} {{ 'é' | tojson(ensure_ascii=true) }}", {"d": {"b": 1, "a": 2}}),
    ("{{ tools | tojson }}", {"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}),
    ("{{ messages[2].tool_calls[0].function.arguments | tojson }}", {"messages": MSGS}),
    # Tests.
    ("{{ x is defined }} {{ x is none }} {{ x is string }} {{ x is number }} {{ x is integer }} {{ x is float }} {{ x is mapping }} {{ x is iterable }} {{ x is sequence }} {{ x is boolean }}", {"x": "s"}),
    ("{{ x is defined }} {{ x is none }} {{ x is string }} {{ x is number }} {{ x is integer }} {{ x is float }} {{ x is mapping }} {{ x is iterable }} {{ x is sequence }} {{ x is boolean }}", {"x": 3}),
    ("{{ x is number }} {{ x is integer }} {{ x is float }} {{ x is boolean }} {{ x is true }} {{ x is false }}", {"x": True}),
    ("{{ x is mapping }} {{ x is iterable }} {{ x is sequence }} {{ y is mapping }} {{ y is sequence }} {{ z is iterable }} {{ z is none }}", {"x": {"a": 1}, "y": [1], "z": None}),
    ("{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'a' is equalto 'a' }} {{ 1 is eq 1 }} {{ 2 is in [1, 2] }} {{ 'a' is lower }} {{ 'A' is upper }}", {}),
    ("{{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 2 is lt 1 }} {{ 2 is le 1 }} {{ 2 is ne 1 }} {{ 2 is == 2 }} {{ 2 is != 2 }} {{ x is callable }} {{ range is callable }}", {"x": 1}),
    ("{{ x is not string }} {{ not x is string }} {{ x is not defined }}", {"x": 1}),
    ("{{ 3.5 is odd }} {{ 3.0 is odd }} {{ -3 is odd }} {{ 4.0 is even }} {{ 'abc, d' is lower }} {{ '123' is lower }} {{ 'A1' is upper }} {{ true is upper }}", {}),
    ("{{ '%s' % [1, 2] }} {{ '%s and %r' % (1, 'b') }} {{ 'no fields' % {'a': 1} }} {{ '%05.1f|%-4d|%x' % (3.14159, 7, 255) }}", {}),
    ("{{ missing | int }}", {}),
    ("{{ x[1:] }}", {"x": 5}),
    ("{{ (1, 2)[1:] }} {{ (1, 2, 3)[::2] }}", {}),
    ("{{ 1 is nosuchtest }}", {}),
    # String methods.
    ("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ s.upper() }}|{{ s.lower() }}|{{ 'ab cd'.title() }}|{{ 'ab cd'.capitalize() }}", {"s": "  Hello World \n"}),
    ("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a\\nb'.splitlines() }} {{ 'a,b'.rsplit(',', 1) }}", {}),
    ("{{ s.startswith('<think>') }} {{ s.endswith('</think>') }} {{ s.startswith(('x', '<')) }} {{ s.find('>') }} {{ s.find('zz') }} {{ s.rfind('<') }} {{ s.count('think') }} {{ s.index('t') }}", {"s": "<think>x</think>"}),
    ("{{ 'a-b'.replace('-', '+') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ '{} and {}'.format(1, 'x') }} {{ '{name}!'.format(name='N') }} {{ '{0}{0}'.format('r') }}", {}),
    ("{{ s.split('</think>')[0].split('<think>')[-1].strip() }}|{{ s.split('</think>')[-1].lstrip('\\n') }}", {"s": "<think>\nreasoning here\n</think>\n\nanswer"}),
    ("{{ 'abc'.isdigit() }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ 'a 1'.isalnum() }} {{ ' '.isspace() }} {{ 'Ab'.islower() }} {{ 'ab'.islower() }} {{ 'x'.join(['a', 'b']) }} {{ 'ab'.zfill(4) }} {{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4, '.') }}{{ 'ab'.rjust(4, '.') }}", {}),
    ("{{ 'a b c'.partition(' ') }} {{ 'a b c'.rpartition(' ') }} {{ 'abc'.partition('x') }} {{ '-5'.zfill(4) }} {{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }}", {}),
    # Dict methods.
    ("{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d['a'] }}", {"d": {"a": 1, "b": [2]}}),
    ("{{ d.a }} {{ d.items is defined }} {{ d.items is callable }} {{ d.items is number }}", {"d": {"items": 5, "a": 1}}),
    ("{{ d['items'] }}", {"d": {"items": 5}}),
    ("{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    # List methods as templates use them.
    ("{% set l = [1, 2] %}{{ l.index(2) }} {{ l.count(1) }} {{ [3, 1, 2] | sort | first }}", {}),
    ("{% set l = [] %}{{ l.append(1) }}{{ l }}", {}),
    # Globals.
    ("{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%B %d, %Y') }} {{ strftime_now('%A %j') }}", {}),
    ("{{ raise_exception('custom failure: ' ~ 42) }}", {}),
    ("{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}ok", {"messages": MSGS}),
    ("{{ dict(a=1, b='x') }} {{ dict({'k': 1}, z=2) }}", {}),
    ("{% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}", {}),
    # Filter and call blocks, generation block.
    ("{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    ("{{ 'a' | upper | replace('A', 'b') ~ 'c' }} {{ -1 | abs }} {{ [1, 2] | length > 1 }}", {}),
    # Errors the template raises implicitly.
    ("{{ 1 / 0 }}", {}),
    ("{{ 1 // 0 }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ 'a' - 1 }}", {}),
    ("{{ none.attr }}", {}),
    ("{{ [1][3] + 1 }}", {}),
    ("{{ nofunc() }}", {}),
    ("{{ 5() }}", {}),
    ("{{ 1 | nosuchfilter }}", {}),
    ("{{ x.__class__ }}", {"x": "s"}),
    # Syntax errors.
    ("{% if true %}unclosed", {}),
    ("{% for x in %}{% endfor %}", {}),
    ("{{ 1 + }}", {}),
    ("{% endif %}", {}),
    ("{{ 'unterminated }}", {}),
    ("{% if true %}{% endfor %}", {}),
    ("{% break %}", {}),
    ("{{ }}", {}),
    ("{% unknowntag %}", {}),
    ("{{ (1, 2 }}", {}),
    ("{{ [1, 2 }}", {}),
    ("{{ {'a' 1} }}", {}),
    ("{# unclosed comment", {}),
    ("{{ 1 2 }}", {}),
    ("{% set %}", {}),
    ("{% macro %}{% endmacro %}", {}),
    ("{{ a.1 }}", {}),
    ("text {{", {}),
]


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web <fast> & \"safe\".",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
                       "required": ["q"]}}},
]

TOOL_CONVERSATION = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Paris? Then search \"crêpes\"."},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 12.5, \"sky\": \"cloudy\"}"},
    {"role": "assistant", "content": "It is 12.5 °C and cloudy."},
    {"role": "user", "content": "Thanks!"},
]

THINKING_CONVERSATION = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
    {"role": "assistant", "content": "Sure.", "reasoning_content": "trivial"},
    {"role": "user", "content": "And 3+3?"},
]


def shared_template_cases():
    """The shared real templates, rendered with tools, tool calls and reasoning turns."""
    import os
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "templates")
    cases = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            source = f.read()
        base = {"bos_token": "<s>", "eos_token": "</s>", "documents": None}
        cases.append((source, dict(base, messages=TOOL_CONVERSATION, tools=TOOLS, add_generation_prompt=True)))
        cases.append((source, dict(base, messages=THINKING_CONVERSATION, tools=None, add_generation_prompt=True,
                                   enable_thinking=False)))
        cases.append((source, dict(base, messages=TOOL_CONVERSATION[1:2], tools=None, add_generation_prompt=False,
                                   custom_tools=TOOLS, tools_in_user_message=False, date_string="26 Jul 2024")))
    return cases


def main():
    env = make_env()
    out = []
    for source, context in CASES + shared_template_cases():
        case = {"template": source, "context": context}
        try:
            tpl = env.from_string(source)
        except (jinja2.TemplateSyntaxError, SyntaxError):
            case["syntax_error"] = True
            out.append(case)
            continue
        try:
            case["text"] = tpl.render(**context)
        except RaisedByTemplate as e:
            case["error"] = str(e)
            case["raised"] = True
        except Exception as e:  # noqa: BLE001 - any failure of the reference is a failure case
            case["error"] = f"{type(e).__name__}: {e}"
            case["raised"] = False
        out.append(case)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
