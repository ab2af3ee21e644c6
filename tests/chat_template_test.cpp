// Chat templates against Hugging Face transformers' apply_chat_template (Python Jinja2 as
// transformers sets it up), run by tests/ref/render_chat.py: the real Qwen3 and Llama 3
// tokenizers (AutoTokenizer on ../shared/data/tokenizers), SmolLM2's template from its GGUF
// file (gguf-py), and small synthetic templates for each Jinja feature and each error, over
// conversations with system turns, multi-turn, tool calls, tool results, reasoning_content,
// names, add_generation_prompt true/false and Qwen3's enable_thinking; strftime_now with a fixed
// clock injected in both. Every output must be byte-identical (the first differing byte offset is
// printed), and where jinja2 raises, kvcompact must throw an Error naming the template.
#include "io/chat_template.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "studies/qa_eval.h"
#include "core/error.h"
#include "io/jinja.h"
#include "python_ref.h"
#include "test_util.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kShared = KVC_SHARED_DIR;
const std::string kQwen3 = kShared + "/data/tokenizers/qwen3";
const std::string kLlama3 = kShared + "/data/tokenizers/llama3";
const char* const kSmolGguf = "SmolLM2-135M-Instruct.Q4_1.gguf";
// strftime_now's fixed clock: 2024-08-01 12:34:56 UTC.
constexpr long long kFixedNow = 1722515696;

fs::path tmp_dir() {
  fs::path d = fs::path(KVC_TEST_TMP) / ("chat_template_" + std::to_string(static_cast<long>(getpid())));
  fs::create_directories(d);
  return d;
}

std::string render(const std::string& src, const ojson& ctx = ojson::object()) {
  return jinja::Template(src, "test").render(ctx);
}

jinja::RenderOptions fixed_clock() {
  jinja::RenderOptions o;
  o.now = [] { return std::chrono::system_clock::from_time_t(static_cast<std::time_t>(kFixedNow)); };
  return o;
}

/// "" when equal, else where and how they first differ.
std::string first_difference(const std::string& got, const std::string& want) {
  if (got == want) return "";
  std::size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  auto around = [&](const std::string& s) { return ojson(s.substr(k < 20 ? 0 : k - 20, 60)).dump(); };
  return "first difference at byte " + std::to_string(k) + " (kvcompact " + std::to_string(got.size()) +
         " bytes, reference " + std::to_string(want.size()) + "): kvcompact " + around(got) + " vs reference " + around(want);
}

// ------------------------------------------------------------------------------------ conversations
ojson msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }

ojson tool_call(const std::string& id, const std::string& name, const ojson& args) {
  return {{"type", "function"}, {"id", id}, {"function", {{"name", name}, {"arguments", args}}}};
}

std::vector<ojson> conversations() {
  std::vector<ojson> c;
  auto add = [&](std::initializer_list<ojson> ms) { c.push_back(ojson::array()); for (const auto& m : ms) c.back().push_back(m); };
  // The conversations of the earlier (Node) reference test.
  add({msg("user", "Hello")});
  add({msg("system", "You are a helpful assistant."), msg("user", "What is 2+2?")});
  add({msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hello! How can I help?"), msg("user", "Tell me a joke.")});
  add({msg("user", "First question"), msg("assistant", "First answer"), msg("user", "Second"), msg("assistant", "Second answer")});
  add({msg("user", "Think about it"), msg("assistant", "<think>\nLet me reason.\n</think>\n\nThe answer is 42."), msg("user", "Why?"),
       msg("assistant", "<think>\nmore\n</think>\n\nBecause.")});
  add({msg("user", "  padded content \n\n"), msg("assistant", "\n answer with spaces  ")});
  add({msg("system", "Only system")});
  add({msg("user", "Unicode: caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x99\x82 \"quotes\" 'single' \\backslash\\")});
  add({msg("user", "Call the tool"), msg("assistant", "Calling."), msg("tool", "{\"result\": 1}"), msg("tool", "second"),
       msg("user", "<tool_response>x</tool_response>")});
  // Tool calls (arguments as objects and as a string), tool results with tool_call_id and name.
  ojson a1 = msg("assistant", "");
  a1["tool_calls"] = ojson::array({tool_call("call_1", "get_weather", {{"city", "Paris"}, {"unit", "celsius"}, {"days", 3}, {"detail", 0.5}})});
  ojson t1 = msg("tool", "{\"temp\": 21}");
  t1["tool_call_id"] = "call_1";
  t1["name"] = "get_weather";
  add({msg("system", "You are a weather bot."), msg("user", "Weather in Paris?"), a1, t1, msg("assistant", "It is 21 \xC2\xB0""C in Paris.")});
  ojson a2 = msg("assistant", "Let me check both.");
  a2["tool_calls"] = ojson::array({tool_call("c1", "lookup", {{"q", "a"}}), tool_call("c2", "lookup", "{\"q\": \"b\"}")});
  add({msg("user", "Look up a and b"), a2, msg("tool", "A"), msg("tool", "B"), msg("user", "Thanks")});
  // reasoning_content on an earlier and on the last assistant turn.
  ojson r1 = msg("assistant", "4");
  r1["reasoning_content"] = "Simple addition: 2+2=4.";
  ojson r2 = msg("assistant", "6");
  r2["reasoning_content"] = "\nAgain addition.\n";
  add({msg("user", "2+2?"), r1, msg("user", "and 3+3?"), r2});
  // name fields.
  ojson u = msg("user", "Hi, I am Ann.");
  u["name"] = "ann";
  add({msg("system", "Group chat."), u, msg("assistant", "Hello Ann!")});
  return c;
}

ojson qwen_tools() {
  return ojson::array({{{"type", "function"},
                        {"function", {{"name", "get_weather"},
                                      {"description", "Current weather of a city"},
                                      {"parameters", {{"type", "object"},
                                                      {"properties", {{"city", {{"type", "string"}, {"description", "City name"}}},
                                                                      {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                                                      {"required", {"city"}}}}}}}});
}

// ----------------------------------------------------------------------- synthetic feature templates
struct Feature {
  std::string name, source;
  ojson kwargs = ojson::object();
};

std::vector<Feature> features() {
  const ojson tools = qwen_tools();
  return {
      {"tojson", R"J({{ tools | tojson(indent=4) }}
{{ messages | tojson }}
{{ {'b': 1, 'a': [1, 2.5, none, true, 'é"\n\t'], 'c': {}} | tojson(sort_keys=true) }}
{{ messages[0] | tojson(separators=(',', ':')) }}|{{ {'x': [], 'y': {}} | tojson(indent=2) }}|{{ 'ü€😀' | tojson(ensure_ascii=true) }}|{{ [1, [2, {'k': 1e-07}]] | tojson(indent='\t') }}
)J", {{"tools", tools}}},
      {"strip", R"J({{ '\n\nx\n'.lstrip('\n') }}|{{ ' xyx '.strip('x') }}|{{ 'xxaxx'.strip('x') }}|{{ 'abc'.rstrip('cb') }}|{{ '  a  '.strip() }}|{{ 'a　'.strip() }}|{{ ' x ' | trim }}|{{ 'xax' | trim('x') }}|{% for m in messages %}{{ m.content.strip('\n ') }};{{ m.content.rstrip('.!?') }};{% endfor %})J"},
      {"fields", R"J({% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.name is defined %} name={{ m.name }}{% endif %}{% if m.tool_calls %}{% for tc in m.tool_calls %}[{{ tc.id }} {{ tc.function.name }} {{ tc.function.arguments | tojson }} {{ tc.function.arguments is mapping }}]{% endfor %}{% endif %}{% if m.reasoning_content is defined %}<r>{{ m.reasoning_content }}</r>{% endif %}{% if m.tool_call_id is defined %}#{{ m.tool_call_id }}{% endif %}
{% endfor %}{{ documents | length if documents else 'nodocs' }} {{ tools is none }} {{ add_generation_prompt }} {{ enable_thinking is defined }} {{ custom | tojson }})J",
       {{"custom", {{"nested", ojson::array({1, "two", nullptr, ojson::object({{"k", false}})})}}}}},
      {"documents", R"J({% for d in documents %}<doc {{ loop.index }}>{{ d.title }}: {{ d.text }}</doc>
{% endfor %}{% for t in tools %}{{ t.function.name }}({{ t.function.parameters.properties | list | join(', ') }}){% endfor %})J",
       {{"tools", tools}, {"documents", ojson::array({{{"title", "A"}, {"text", "alpha"}}, {{"title", "B"}, {"text", "beta"}}})}}},
      {"undefined", R"J([{{ nope }}][{{ messages[0].nope }}][{{ nope is defined }}][{{ nope | default('d') }}][{{ nope | length }}][{% for x in nope %}x{% endfor %}][{{ messages[100] }}][{{ 'a' if nope else 'b' }}][{{ nope ~ 'z' }}][{{ none | string }}][{{ messages[0]['nope'] is defined }}][{{ nope | upper }}][{{ nope | list }}][{{ (none.x) is defined }}])J"},
      {"loopcontrols", R"J({% for m in messages %}{% if loop.index > 3 %}{% break %}{% endif %}{% if m.role == 'system' %}{% continue %}{% endif %}{{ loop.index }}{{ m.role }};{% endfor %}|{% for i in range(5) %}{% for j in range(5) %}{% if j > i %}{% break %}{% endif %}{{ j }}{% endfor %},{% endfor %}|{% for i in range(6) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% else %}none{% endfor %})J"},
      {"macros", R"J({% macro render(m, prefix='> ', upper=false) -%}
{{ prefix }}{{ m.role | upper if upper else m.role }}: {{ m.content }}
{%- endmacro %}
{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}
{% macro each(items) %}{% for x in items %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}
{% macro extra() %}{{ varargs | length }}{{ kwargs | tojson }}{{ greeting }}{% endmacro %}
{% set greeting = 'hi' %}
{% for m in messages %}{{ render(m) }}|{{ render(m, '# ') }}|{{ render(m, upper=true) }}
{% endfor %}{% call wrap('b') %}inner {{ messages | length }}{% endcall %}
{% call(x, i) each(['p', 'q']) %}{{ i }}={{ x }} {% endcall %}{{ extra(1, 2, k='v') }})J"},
      {"select", R"J({{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | join(',') }}|{{ messages | map(attribute='content') | map('length') | list }}|{{ [1,2,3,4] | select('odd') | list }}|{{ [1,2,3,4] | reject('even') | list }}|{{ messages | selectattr('tool_calls') | list | length }}|{{ [0, 1, '', 'a', none] | select | list }}|{{ messages | selectattr('role', 'in', ['user', 'system']) | map(attribute='role') | list }}|{{ messages | map(attribute='name', default='anon') | list }}|{{ messages | map('tojson') | first }}|{{ messages | selectattr('role', '==', 'assistant') | map(attribute='content') | map('upper') | join('/') }}|{{ [3, 1, 2] | map('string') | join }})J"},
      {"generation", R"J({% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% set x = 1 %}{% endgeneration %}{{ x is defined }}{% else %}{{ m.content }}{% endif %}
{% endfor %})J"},
      {"strings", R"J({% set s = messages[0].content %}{{ s.startswith('Hel') }}{{ s.startswith(('x', 'W')) }}{{ s.endswith(('?', 'o')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b c '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'l1\nl2\r\nl3'.splitlines() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'x'.join(['1', '2']) }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'hello' | capitalize }}|{{ "it's a-b (c)" | title }}|{{ s.upper() }}{{ s | lower }}|{{ 'abcdef'[1:4] }}{{ 'abcdef'[::-1] }}{{ 'abcdef'[-2:] }}{{ 'abcdef'[::2] }}{{ s[0] }}|{{ 'abcabc'.find('c') }}{{ 'abc'.find('z') }}{{ 'abcabc'.count('b') }}{{ 'abcabc'.rfind('a') }}|{{ 'Hi %s, %d items, %.2f, %5s|%-5s|%03d %x %r %%' % ('Bob', 3, 3.14159, 'r', 'l', 7, 255, 'q') }}|{{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }}|{{ '{} and {name}'.format(1, name='n') }}|{{ 'abc' ~ 1 ~ none ~ true }}|{{ '  x' | trim | length }}|{{ 'ab' * 3 }}{{ 3 * 'c' }}|{{ 'b' in 'abc' }}{{ 'z' not in 'abc' }}|{{ 'a-b' | replace('-', '+') }}|{{ 'x' | center(7) }}|{{ 'one two three' | wordcount }}|{{ '%s!' | format('hey') }}|{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ '<a href="x">&' | e }}|{{ 'abc'.zfill(5) }}{{ 'a=b=c'.partition('=') }}{{ 'xay'.removeprefix('x') }}|{{ 'é' | upper }}{{ 'ÉCOLE' | lower }}{{ 'élan vital' | title }}{{ 'éCOLE'.capitalize() }}{{ 'ÀB'.isupper() }}|{{ messages | first | attr('role') }}|{{ 'A b'.lower().split() | map('capitalize') | join(' ') }})J"},
      {"misc", R"J({{ '%s' % none }}|{{ '%d' % 3.7 }}|{{ '%5.1f' % 2.25 }}|{{ '%-10s|' % 'ab' }}|{{ '%s %s' % ('a', [1]) }}|{{ '%.3g|%e|%10.4f|%+d|% d|%x|%o|%c' % (1234.5, 0.5, 3.14159, 5, 5, 255, 8, 65) }}|{% for m in messages %}{{ loop.changed(m.role) }}{% endfor %}|{{ messages | map(attribute='role') | unique | list }}|{{ messages[0]['content'] | replace('
', '\n') }}|{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}{{ v }}{% endfor %}|{% set ns = namespace() %}{{ ns is defined }}{% if ns %}T{% endif %}{% set ns.x = 1 %}{{ ns.x }}|{{ none | trim }}|{{ {'a': none} | tojson(indent=0) }}|{{ 'a' 'b' }}{{ ('x' ~ 'y') | upper }}{{ not none }}|{{ messages[0] }}|{{ [1.5, 1e100, 1e-10, 123456789012345678.0] }}|{{ 'x'.startswith('') }}{{ ''.split(',') }}{{ 'a'.split('a') }}{{ '  '.split() }}|{{ messages[1:] | length }}{{ messages[:-1] | map(attribute='role') | list }}|{{ '{"a": 1}' | tojson }}{{ '' | tojson }}|{{ 3 / 2 * 2 }} {{ 2 ** -1 }} {{ 4 ** 0.5 }} {{ 7 % -3 }} {{ -7 // -2 }}|{{ 'abc' | batch(2) | list }}|{{ true and none }}|{{ false or 0 }}|{{ [] or 'x' }}|{{ messages | selectattr('content', 'string') | list | length }}|{% if 'system' in messages | map(attribute='role') %}sys{% endif %}|{{ messages[0].content[:3] ~ '...' }}{{ messages[0].content[100:] }}|{{ 'abc'[5] }}|{{ x.y if x is defined else 'nox' }}{% set x = {'y': 2} %}{{ x.y }})J"},
      {"values", R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 10 / 4 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 123456789.0 }} {{ 1.0 }} {{ -0.0 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ true + 1 }} {{ true == 1 }} {{ 1 == 1.0 }}|{{ [1, 'a', none, true, false, 2.50, {'k': (1,)}, (1, 2), [], {}] }}|{{ {'a': 1, 'b': [1]}.items() | list }}|{{ (1, 2) }}|{{ "it's" }}|{{ ["it's", 'q"', 'both\'"', 'nl\n', '\\'] }}|{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}|{{ 'b' in {'b': 1} }}{{ 2 in [1, 2] }}{{ (1, 2) == [1, 2] }}{{ [1, 2] == [1, 2] }}{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}|{{ 3 is divisibleby 3 }}{{ none is sameas none }}{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 'x' is string }}{{ messages is iterable }}{{ messages[0] is mapping }}{{ messages is sequence }}{{ 'a' is iterable }}{{ 3 is iterable }}{{ none is none }}{{ 3 is odd }}{{ 4 is even }}{{ false is false }}{{ true is true }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 2 is eq 2 }}{{ 2 is gt 1 }}{{ 2 is le 1 }}{{ 2 is ne 3 }}{{ 'a' is in 'abc' }}{{ 1 is boolean }}|{{ range(1, 10, 3) | list }}{{ range(3) | list }}{{ range(5, 0, -2) | list }}|{{ [3, 1, 2] | sort }}{{ ['b', 'A', 'a', 'C'] | sort }}{{ ['b', 'A', 'a'] | sort(case_sensitive=true) }}{{ [3, 1, 2] | sort(reverse=true) }}{{ messages | sort(attribute='role') | map(attribute='role') | list }}|{{ [1, 2, 2, 'a', 'A'] | unique | list }}|{{ [1, 2, 3.5] | sum }}{{ [1, 2] | sum(start=10) }}{{ [3, 1, 2] | max }}{{ ['b', 'A'] | min }}|{{ 3.14159 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 7 | round }} {{ 2.567 | round(1, 'floor') }} {{ 2.111 | round(1, 'ceil') }}|{{ '42' | int }}{{ '4.7' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}{{ '0x1f' | int(0, 16) }}|{{ '2.5' | float }}{{ 3 | float }}{{ 'x' | float }}|{{ -3 | abs }}{{ -2.5 | abs }}|{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ 'abc' | first }}{{ 'abc' | last }}|{{ [1, 2, 3] | reverse | list }}{{ 'abc' | reverse }}|{{ 'ab' | list }}{{ {'a': 1, 'b': 2} | list }}|{{ {'b': 1, 'a': 2} | dictsort }}{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}|{{ [1, 2, 3, 4, 5] | batch(2) | list }}{{ [1, 2, 3] | batch(2, 0) | list }}|{{ '' | default('empty', true) }}{{ 0 | default(5) }}{{ none | default(5) }}{{ none | d(5, boolean=true) }}|{{ [1,2] | length }}{{ 'héllo' | length }}{{ {'a': 1} | length }}{{ [1,2] | count }}|{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b') }}{{ {'a': 1}.get('b', 9) }}{{ {'a': 1}.keys() | list }}{{ {'a': 1}.values() | list }}{{ [1, 2, 1].count(1) }}{{ [5, 6].index(6) }}|{{ {'a': 1, 'a': 2} }}{{ dict(x=1, y='z') }}|{{ -(3) }}{{ - 2 | abs }}{{ not 1 }}|{{ 'yes' if 1 else 'no' }}{{ 'yes' if 0 else 'no' }}[{{ 'yes' if 0 }}]|{{ 1 and 'x' }}{{ 0 or 'y' }}{{ none or [] }}|{{ 12_000 }} {{ 1_0.5 }} {{ 2e3 }} {{ 0.5e-3 }})J"},
      {"namespace_loop", R"J({% set ns = namespace(count=0, last='', items=[]) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{% set ns.items = ns.items + [loop.index0] %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.depth }}/{{ loop.previtem.role if loop.previtem is defined else '-' }}/{{ loop.nextitem.role if loop.nextitem is defined else '-' }}/{{ loop.cycle('odd', 'even') }} {% endfor %}{{ ns.count }} {{ ns.last }} {{ ns.items }}|{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for a, b in [[1, 2], (3, 4), 'xy'] %}{{ a }}{{ b }}{% endfor %}|{% for c in 'héllo' %}{{ c }}.{% endfor %}|{% for m in messages if m.role == 'user' %}{{ loop.index }}{{ loop.length }}{% else %}no users{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}|{% set outer = 'o' %}{% for i in [1] %}{% set outer = 'i' %}{% endfor %}{{ outer }}|{% set block %}captured {{ messages | length }}{% endset %}{{ block }}|{% filter upper %}loud {{ messages[0].role }}{% endfilter %}|{% with w = 5, v = 6 %}{{ w + v }}{% endwith %}{{ w is defined }}|{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}|{% set j = joiner('+') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %})J"},
      {"whitespace", "start\n  {% if true %}\n    indented text\n  {% endif %}\n\t{% for i in range(2) %}\n[{{ i }}]\n\t{% endfor %}\n  {{ 'var line keeps its indent' }}\nmid {% if true %}inline{% endif %} line\n{# a comment #}\n  {# indented comment #}\nafter\n{%- if true -%}\n  stripped both\n{%- endif %}\n{%+ if true %}plus keeps{% endif %}\n  {%+ if true %}plus keeps indent{% endif %}\n{{- ' dash var ' -}}\n  x  \n{% raw %}{{ not evaluated }} {% if %}{% endraw %}\nraw done\r\nCRLF line\r\n{%- for m in messages %}\n  {{- m.role }}\n{% endfor %}\nend\n"},
      {"llama31_tools", R"J({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {{- "<|start_header_id|>user<|end_header_id|>\n\n" }}
    {{- "Given the following functions, respond with a JSON function call.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- "<|eot_id|>" }}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable and message.content is not string %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)J", {{"tools", tools}}},
      {"strftime", R"J({{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %j %p %I %y %a %b %e') }}|{{ strftime_now('%-d %B') }}|{{ strftime_now('%f') }})J"},
  };
}

// Templates where jinja2 raises; each must throw an Error naming the template.
std::vector<Feature> error_templates() {
  return {
      {"undefined attribute", "{{ nope.attr }}"},
      {"attribute of a missing field", "{% for m in messages %}{{ m.nope.deeper }}{% endfor %}"},
      {"attribute of none's attribute", "{{ none.x.y }}"},
      {"item of undefined", "{{ nope[0] }}"},
      {"call of undefined", "{{ nope() }}"},
      {"method of undefined", "{{ messages[0].nope.strip() }}"},
      {"undefined plus", "{{ nope + 1 }}"},
      {"raise_exception", "{% if messages[0].role != 'system' %}{{ raise_exception('Only system first!') }}{% endif %}"},
      {"str plus int", "{{ 'a' + 1 }}"},
      {"int plus str", "{{ 1 + 'a' }}"},
      {"compare str int", "{{ 'a' < 1 }}"},
      {"tojson undefined", "{{ nope | tojson }}"},
      {"division by zero", "{{ 1 / 0 }}"},
      {"unknown filter", "{{ 'x' | nosuchfilter }}"},
      {"unknown test", "{{ 'x' is nosuchtest }}"},
      {"list append", "{{ messages.append(1) }}"},
      {"for over none", "{% for x in none %}{% endfor %}"},
      {"syntax: unclosed if", "{% if true %}never closed"},
      {"syntax: unknown tag", "{% frobnicate %}"},
      {"syntax: unexpected end tag", "{% for x in y %}{% endif %}"},
      {"inline if without else, then attribute", "{{ (1 if false).x }}"},
      {"single tool call only", "{% for m in messages %}{% if m.tool_calls is defined and m.tool_calls | length != 1 %}{{ raise_exception('single tool call only') }}{% endif %}{% endfor %}"},
  };
}

// ------------------------------------------------------------------------------ reference comparison
struct Case {
  std::string label;
  const ChatTemplate* tmpl;
  ojson spec;  // the reference renderer's case
  ojson messages;
  bool gen;
  ojson kwargs;
  bool expect_failure_somewhere = false;
};

TEST(ChatTemplate, MatchesTransformersApplyChatTemplate) {
  ASSERT_TRUE(testing::python_ready("transformers jinja2 gguf"));
  const std::string smol = testing::real_model(kSmolGguf);
  ASSERT_FALSE(smol.empty()) << kSmolGguf << " is missing from " << testing::kModelsDir << ": run scripts/fetch_models.sh";
  // A saved folder as transformers >= 4.43 writes it: chat_template.jinja beside a
  // tokenizer_config.json that has its own chat_template; transformers uses the .jinja file.
  const fs::path jinja_dir = tmp_dir() / "qwen3_with_jinja";
  fs::create_directories(jinja_dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(kQwen3) / f, jinja_dir / f, fs::copy_options::overwrite_existing);
  std::ofstream(jinja_dir / "chat_template.jinja")
      << "{%- for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% if m.name is defined %} ({{ m.name }})"
         "{% endif %}{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}";
  std::map<std::string, ChatTemplate> real{{"qwen3", load_chat_template(kQwen3)},
                                           {"qwen3_jinja", load_chat_template(jinja_dir.string())},
                                           {"llama3", load_chat_template(kLlama3 + "/tokenizer_config.json")},
                                           {"smollm2", load_gguf_chat_template(smol)}};
  EXPECT_EQ(real.at("qwen3_jinja").path, (jinja_dir / "chat_template.jinja").string());
  const std::vector<ojson> convs = conversations();
  std::vector<Case> cases;
  for (const auto& [name, t] : real) {
    const std::string dir = name == "qwen3" ? kQwen3 : name == "qwen3_jinja" ? jinja_dir.string() : kLlama3;
    ojson spec = name == "smollm2" ? ojson{{"gguf", smol}} : ojson{{"tokenizer", dir}};
    std::vector<ojson> kwarg_sets{ojson::object()};
    if (name == "qwen3") {
      kwarg_sets.push_back({{"enable_thinking", false}});
      kwarg_sets.push_back({{"enable_thinking", true}});
      kwarg_sets.push_back({{"tools", qwen_tools()}});
    }
    for (std::size_t ci = 0; ci < convs.size(); ++ci)
      for (bool gen : {false, true})
        for (const ojson& kw : kwarg_sets)
          cases.push_back({fmt::format("{} conversation {} gen {} kwargs {}", name, ci, gen, kw.dump()), &t, spec, convs[ci], gen, kw});
  }
  std::vector<ChatTemplate> synthetic;
  const std::vector<Feature> feats = features(), errs = error_templates();
  synthetic.reserve(feats.size() + errs.size());
  for (const auto& f : feats) synthetic.push_back(make_chat_template(f.source, "<s>", "</s>", "feature " + f.name));
  for (const auto& f : errs) {
    try {
      synthetic.push_back(make_chat_template(f.source, "<s>", "</s>", "error " + f.name));
    } catch (const Error&) {
      synthetic.push_back(ChatTemplate{"error " + f.name, f.source, "<s>", "</s>", ojson::object(), nullptr});
    }
  }
  const ojson special{{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const std::vector<std::size_t> feature_convs{0, 2, 9, 10, 11, 12};
  for (std::size_t k = 0; k < synthetic.size(); ++k) {
    const bool is_err = k >= feats.size();
    const Feature& f = is_err ? errs[k - feats.size()] : feats[k];
    for (std::size_t ci : feature_convs)
      for (bool gen : {false, true})
        cases.push_back({fmt::format("{} {} conversation {} gen {}", is_err ? "error" : "feature", f.name, ci, gen), &synthetic[k],
                         ojson{{"template", f.source}, {"special_tokens", special}}, convs[ci], gen, f.kwargs, is_err});
  }

  ojson input{{"now", kFixedNow}, {"cases", ojson::array()}};
  for (const Case& c : cases) {
    ojson s = c.spec;
    s["messages"] = c.messages;
    s["add_generation_prompt"] = c.gen;
    s["kwargs"] = c.kwargs;
    input["cases"].push_back(s);
  }
  const fs::path in = tmp_dir() / "chat_input.json", out = tmp_dir() / "chat_ref.json";
  std::ofstream(in) << input.dump();
  ASSERT_EQ(testing::run_python_ref("render_chat.py", "'" + in.string() + "'", out.string()), 0)
      << "reference renderer failed: " << testing::slurp(out.string() + ".log");
  const ojson ref = ojson::parse(testing::slurp(out.string()));
  ASSERT_EQ(ref.at("outputs").size(), cases.size());

  std::size_t texts = 0, errors = 0;
  std::map<std::string, bool> error_template_raised;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const ojson& want = ref["outputs"][k];
    std::string got, err;
    try {
      if (!c.tmpl->compiled) {  // parse error: re-raise it
        make_chat_template(c.tmpl->source, "<s>", "</s>", c.tmpl->path);
      }
      got = render_chat_json(*c.tmpl, c.messages, c.gen, c.kwargs, fixed_clock());
    } catch (const Error& e) {
      err = e.what();
    }
    if (want.contains("error")) {
      ++errors;
      if (c.expect_failure_somewhere) error_template_raised[c.label.substr(0, c.label.find(" conversation"))] = true;
      const std::string wmsg = want["message"].get<std::string>();
      if (!c.expect_failure_somewhere && want["error"] != "TemplateError")  // only raise_exception may stop them
        ADD_FAILURE() << c.label << ": the reference raised " << want["error"].get<std::string>() << ": " << wmsg;
      if (err.empty()) {
        ADD_FAILURE() << c.label << ": jinja2 raised " << want["error"].get<std::string>() << " (" << wmsg
                      << ") but kvcompact rendered " << ojson(got).dump();
        continue;
      }
      EXPECT_EQ(err.rfind(c.tmpl->path + ":", 0), 0u) << c.label << ": error does not name the template: " << err;
      const std::string cls = want["error"].get<std::string>();
      if (cls == "UndefinedError" || cls == "TemplateError") {
        EXPECT_NE(err.find(wmsg), std::string::npos) << c.label << ": kvcompact says '" << err << "', jinja2 " << cls << " '" << wmsg << "'";
      }
      continue;
    }
    if (!err.empty()) {
      ADD_FAILURE() << c.label << ": kvcompact threw '" << err << "' where jinja2 rendered " << want["text"].dump();
      continue;
    }
    ++texts;
    const std::string diff = first_difference(got, want["text"].get<std::string>());
    EXPECT_TRUE(diff.empty()) << c.label << ": " << diff;
  }
  // Every error template raised in jinja2 for at least one conversation (else it tests nothing).
  for (const auto& f : errs) EXPECT_TRUE(error_template_raised["error " + f.name]) << "error template '" << f.name << "' never raised in jinja2";
  EXPECT_GT(texts, 300u);
  std::printf("[ reference ] %zu rendered cases byte-identical, %zu jinja2 errors matched\n", texts, errors);
}

// ---------------------------------------------------------------------------------- hand-worked
TEST(Jinja, HandWorked) {
  EXPECT_EQ(render("Hello {{ name }}!", {{"name", "Bob"}}), "Hello Bob!");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
                   {{"xs", {"a", "b", "c"}}}),
            "0a,1b,2c");
  EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
  // trim_blocks + lstrip_blocks: the tag lines vanish; the template's final newline is dropped.
  EXPECT_EQ(render("x\n  {% if true %}\ny\n  {% endif %}\nz\n"), "x\ny\nz");
  // Python semantics: strip(chars) removes only those characters; values print as Python str().
  EXPECT_EQ(render("{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ ' xyx '.strip('x') }}|{{ 'xyx'.strip('x') }}"), "x\n| xyx |y");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }} {{ [1, 'a'] | tojson }} {{ {'a': [1]} | tojson(indent=2) }}"),
            "[1, 'a', None, True] [1, \"a\"] {\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{% for m in ms %}{{ m.tool_calls[0].function.name }}{% endfor %}",
                   {{"ms", ojson::array({{{"role", "assistant"}, {"tool_calls", ojson::array({{{"function", {{"name", "f"}}}}})}}})}}),
            "f");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "012");
  EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }}{{ m('y', b='z') }}"), "xByz");
  EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");
  jinja::RenderOptions o = fixed_clock();
  EXPECT_EQ(jinja::Template("{{ strftime_now('%Y') }}", "t").render(ojson::object(), o), "2024");
}

TEST(Jinja, UndefinedAttributeThrowsNamingTheTemplate) {
  testing::expect_error([] { jinja::Template("line1\n{{ message.content }}", "my_template").render(ojson::object()); },
                        {"my_template: line 2", "'message' is undefined"});
  testing::expect_error([] { jinja::Template("{{ m.a.b }}", "t").render({{"m", ojson::object()}}); },
                        {"t: line 1", "'dict object' has no attribute 'a'"});
  // Plain undefined values render empty, as in jinja2.
  EXPECT_EQ(render("[{{ nope }}{{ m.a }}]", {{"m", ojson::object()}}), "[]");
}

TEST(Jinja, Errors) {
  testing::expect_error([] { render("{{ raise_exception('Only user and assistant roles') }}"); },
                        {"test: raise_exception: Only user and assistant roles"});
  testing::expect_error([] { render("{{ x | nosuchfilter }}"); }, {"test: line 1", "No filter named 'nosuchfilter'"});
  testing::expect_error([] { jinja::Template("{% if x %}never closed", "t"); }, {"t: line 1", "endif"});
  testing::expect_error([] { jinja::Template("{{ 'unterminated }}", "t"); }, {"t: line 1"});
  testing::expect_error([] { jinja::Template("{% for x in y recursive %}{% endfor %}", "t"); }, {"recursive"});
  testing::expect_error([] { jinja::Template("{% break %}", "t"); }, {"outside of a for loop"});
  testing::expect_error([] { jinja::Template("line1\n{% for %}", "tmpl"); }, {"tmpl: line 2"});
  // Python raises RecursionError / computes a big integer; we give one-line errors, never a
  // stack overflow, a wrapped integer or a billion-step loop.
  testing::expect_error([] { render("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"); },
                        {"test: line 1", "maximum recursion depth exceeded in macro 'm'"});
  testing::expect_error([] { render("{{ 3 ** 1000000000000 }}"); }, {"integer overflow in **"});
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 1 ** 1000000000000 }}"),
            "4611686018427387904 -9223372036854775808 1");
  // Found by the jinja fuzz harness (std::out_of_range escaped the interpreter): an integer
  // attribute beyond 64 bits, and its relatives.
  testing::expect_error([] { jinja::Template("{{ ns.111111111111111111111111111111 }}", "t"); },
                        {"t: line 1", "integer literal too large"});
  testing::expect_error([] { render("{{ '{99999999999999999999999}'.format(1) }}"); }, {"str.format field too large"});
  testing::expect_error([] { render("{{ '%99999999d' % 1 }}"); }, {"format width too large"});
  testing::expect_error([] { render("{{ '%.99999999f' % 1.5 }}"); }, {"format precision too large"});
  testing::expect_error([] { render("{{ 9223372036854775807 + 1 }}"); }, {"integer overflow in +"});
  testing::expect_error([] { render("{{ -9223372036854775807 - 2 }}"); }, {"integer overflow in -"});
  testing::expect_error([] { render("{{ 4294967296 * 4294967296 }}"); }, {"integer overflow in *"});
  testing::expect_error([] { render("{{ 'ab' * 100000000000 }}"); }, {"sequence repetition too large"});
  // Found by the chat_template fuzz harness (a null slice base evaluated: UBSan).
  testing::expect_error([] { jinja::Template("{% for m in messages[::,2] %}{% endfor %}", "t"); },
                        {"t: line 1", "a slice inside a tuple subscript is not supported"});
  // Values that fit behave as in Python (jinja2 3.1.6 prints these).
  EXPECT_EQ(render("{{ 9223372036854775806 + 1 }} {{ 1e999 }} {{ '%5d|%-4s|' % (42, 'x') }} {{ 'ab' * 3 }}"),
            "9223372036854775807 inf    42|x   | ababab");
}

TEST(Jinja, MacrosSeeTheirDefiningScope) {
  // Each loop iteration's macro sees that iteration's variables (values from jinja2 3.1.6); the
  // frames are freed with the render (ASan's leak check covers the macro <-> frame cycle).
  EXPECT_EQ(render("{% for x in ['a', 'b'] %}{% macro m() %}[{{ x }}]{% endmacro %}{{ m() }}{% endfor %}"), "[a][b]");
  EXPECT_EQ(render("{% macro outer(n) %}{% if n > 0 %}{{ n }}{{ outer(n - 1) }}{% endif %}{% endmacro %}{{ outer(5) }}"), "54321");
}

// ------------------------------------------------------------------------------------------ loading
TEST(ChatTemplate, LoadErrors) {
  testing::expect_error([] { load_chat_template(tmp_dir().string() + "/missing.json"); }, {"missing.json", "cannot open"});
  const fs::path p = tmp_dir() / "no_template.json";
  std::ofstream(p) << "{\"bos_token\": \"<s>\"}";
  testing::expect_error([&] { load_chat_template(p.string()); }, {p.string(), "no chat template", "chat_template.jinja"});
  // Found by the chat_template fuzz harness: a list entry whose "name" is not a string threw
  // nlohmann's type_error out of the loader; now such entries are skipped.
  const fs::path odd = tmp_dir() / "odd_names.json";
  std::ofstream(odd) << R"({"chat_template": [{"name": {"x": 1}, "template": "A"}, {"name": "default", "template": "B"}]})";
  EXPECT_EQ(load_chat_template(odd.string()).source, "B");
  std::ofstream(odd) << R"({"chat_template": [{"name": 7, "template": "A"}]})";
  testing::expect_error([&] { load_chat_template(odd.string()); }, {odd.string(), "no 'default' entry"});
  EXPECT_THROW(chat_messages_from_json(nlohmann::json::parse("[{\"role\": \"user\"}]"), "m"), Error);
  EXPECT_THROW(chat_messages_from_json(nlohmann::json::parse("{}"), "m"), Error);
  testing::expect_error([] { chat_messages_json(ojson::parse("[{\"content\": \"x\"}]"), "msgs"); }, {"msgs: message 0"});
  const fs::path bad = tmp_dir() / "bad.gguf";
  std::ofstream(bad) << "not a gguf";
  testing::expect_error([&] { load_gguf_chat_template(bad.string()); }, {bad.string()});
}

TEST(ChatTemplate, ChatTemplateJinjaBesideTheConfigWins) {
  const fs::path d = tmp_dir() / "jinja_folder";
  fs::create_directories(d);
  std::ofstream(d / "tokenizer_config.json") << R"({"bos_token": "<B>", "eos_token": {"content": "<E>"}, "pad_token": "<P>",
                                                   "chat_template": "from config"})";
  std::ofstream(d / "chat_template.jinja") << "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{% endfor %}{{ pad_token }}{{ eos_token }}\n";
  for (const std::string& p : {d.string(), (d / "tokenizer_config.json").string(), (d / "chat_template.jinja").string()}) {
    const ChatTemplate t = load_chat_template(p);
    EXPECT_EQ(t.path, (d / "chat_template.jinja").string());
    EXPECT_EQ(render_chat(t, {{"user", "x"}}, false), "<B>[user]<P><E>") << p;
  }
  // find_chat_template (generate/qa-eval --chat) finds it beside a tokenizer.json too.
  EXPECT_EQ(find_chat_template("model.bin", (d / "tokenizer.json").string())->path, (d / "chat_template.jinja").string());
  // Without the .jinja file the config's template is used.
  fs::remove(d / "chat_template.jinja");
  EXPECT_EQ(render_chat(load_chat_template(d.string()), {{"user", "x"}}, false), "from config");
}

TEST(ChatTemplate, GgufTemplateIsFound) {
  const std::string smol = testing::real_model(kSmolGguf);
  ASSERT_FALSE(smol.empty()) << kSmolGguf << " is missing: run scripts/fetch_models.sh";
  const auto t = find_chat_template(smol, "");
  EXPECT_EQ(t->path, smol + ": tokenizer.chat_template");
  EXPECT_EQ(render_chat(*t, {{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3HandWorked) {
  const ChatTemplate t = load_chat_template(kLlama3);
  EXPECT_EQ(t.bos_token, "<|begin_of_text|>");
  EXPECT_EQ(t.eos_token, "<|end_of_text|>");
  EXPECT_EQ(render_chat(t, {{"user", " Hi \n"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Qwen3HandWorked) {
  const ChatTemplate t = load_chat_template(kQwen3 + "/tokenizer_config.json");
  EXPECT_EQ(t.bos_token, "");
  EXPECT_FALSE(t.special_tokens.contains("bos_token"));  // null in the config: undefined, as transformers
  EXPECT_EQ(t.eos_token, "<|im_end|>");
  EXPECT_EQ(render_chat(t, {{"system", "S"}, {"user", "Hi"}}, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(t, {{"user", "Hi"}}, true, {{"enable_thinking", false}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}}  // namespace
}  // namespace kvcompact
