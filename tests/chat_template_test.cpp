// Chat templates: the real Qwen3 and Llama 3 chat_template of tokenizer_config.json rendered on
// several conversations (with/without system message, multi-turn, <think> content, tool turn,
// Qwen3 enable_thinking default/false/true), with and without add_generation_prompt, byte-identical
// to @huggingface/jinja (pinned in tests/js/package.json, run by Node); plus small templates for
// the Jinja subset with hand-worked outputs, and errors.
#include "io/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/error.h"
#include "io/jinja.h"

namespace kvcompact {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kShared = KVC_SHARED_DIR;
const std::string kJsDir = std::string(KVC_SOURCE_DIR) + "/tests/js";

fs::path tmp_dir() {
  fs::path d = fs::path(KVC_TEST_TMP) / "chat_template";
  fs::create_directories(d);
  return d;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string render(const std::string& src, const ojson& ctx = ojson::object()) {
  return jinja::Template(src, "test").render(ctx);
}

TEST(Jinja, HandWorked) {
  EXPECT_EQ(render("Hello {{ name }}!", {{"name", "Bob"}}), "Hello Bob!");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
                   {{"xs", {"a", "b", "c"}}}),
            "0a,1b,2c");
  EXPECT_EQ(render("{%- for x in xs[::-1] %}{{ x }}{% endfor -%}", {{"xs", {1, 2, 3}}}), "321");
  EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
  // trim_blocks + lstrip_blocks: the tag lines vanish; the template's final newline is dropped.
  EXPECT_EQ(render("x\n  {% if true %}\ny\n  {% endif %}\nz\n"), "x\ny\nz");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(render("{{ '  hi \n' | trim }}|{{ 'a,b,c'.split(',')[-1] }}|{{ xs | length - 1 }}", {{"xs", {1, 2}}}),
            "hi|c|1");
  // strip() ignores its argument, as in @huggingface/jinja.
  EXPECT_EQ(render("{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ ' xyx '.strip('x') }}|{{ 'abc'.startswith('ab') }}"), "x\n|xyx|True");
  EXPECT_EQ(render("{{ m.role if m.role is defined else 'none' }} {{ m.other is defined }} {{ m['role'] }}",
                   {{"m", {{"role", "user"}}}}),
            "user False user");
  EXPECT_EQ(render("{{ x | default('d') }}{{ 'lit' ~ 3 }}{{ 7 // 2 }}{{ -7 % 3 }}{{ [1, 'a', none, true] | tojson }}"),
            "dlit332[1, \"a\", null, true]");
  EXPECT_EQ(render("{# comment #}{% if 'b' in 'abc' and 2 not in [1, 3] %}yes{% else %}no{% endif %}"), "yes");
  EXPECT_EQ(render("{% if x is none %}N{% elif x is false %}F{% else %}E{% endif %}", {{"x", false}}), "F");
}

TEST(Jinja, Errors) {
  EXPECT_THROW(render("{{ raise_exception('bad role') }}"), Error);
  try {
    render("{{ raise_exception('Only user and assistant roles') }}");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Only user and assistant roles"), std::string::npos);
  }
  EXPECT_THROW(render("{{ x | nosuchfilter }}"), Error);
  EXPECT_THROW(jinja::Template("{% if x %}never closed", "t"), Error);
  EXPECT_THROW(jinja::Template("{{ 'unterminated }}", "t"), Error);
  EXPECT_THROW(jinja::Template("{% macro m() %}{% endmacro %}", "t"), Error);
  try {
    jinja::Template("line1\n{% for %}", "tmpl");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tmpl: line 2"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, LoadErrors) {
  EXPECT_THROW(load_chat_template(tmp_dir().string() + "/missing.json"), Error);
  const fs::path p = tmp_dir() / "no_template.json";
  std::ofstream(p) << "{\"bos_token\": \"<s>\"}";
  EXPECT_THROW(load_chat_template(p.string()), Error);
  EXPECT_THROW(chat_messages_from_json(nlohmann::json::parse("[{\"role\": \"user\"}]"), "m"), Error);
  EXPECT_THROW(chat_messages_from_json(nlohmann::json::parse("{}"), "m"), Error);
}

TEST(ChatTemplate, Llama3HandWorked) {
  const ChatTemplate t = load_chat_template(kShared + "/data/tokenizers/llama3");
  EXPECT_EQ(t.bos_token, "<|begin_of_text|>");
  EXPECT_EQ(t.eos_token, "<|end_of_text|>");
  // The template always ends with the assistant header (it ignores add_generation_prompt), and
  // trims message content.
  EXPECT_EQ(render_chat(t, {{"user", " Hi \n"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Qwen3HandWorked) {
  const ChatTemplate t = load_chat_template(kShared + "/data/tokenizers/qwen3/tokenizer_config.json");
  EXPECT_EQ(t.bos_token, "");
  EXPECT_EQ(t.eos_token, "<|im_end|>");
  EXPECT_EQ(render_chat(t, {{"system", "S"}, {"user", "Hi"}}, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(t, {{"user", "Hi"}}, true, {{"enable_thinking", false}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

/// Conversations rendered by both templates and by small feature templates, against the reference.
TEST(ChatTemplate, MatchesHuggingFaceJinja) {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0)
      << "node (Node.js) is not on PATH: the reference renderer cannot run; install nodejs and run scripts/setup.sh";
  ASSERT_TRUE(fs::exists(kJsDir + "/node_modules/@huggingface/jinja/package.json"))
      << kJsDir << "/node_modules lacks @huggingface/jinja: run `npm ci --prefix tests/js` (scripts/setup.sh does)";

  std::vector<ChatTemplate> templates{load_chat_template(kShared + "/data/tokenizers/qwen3"),
                                      load_chat_template(kShared + "/data/tokenizers/llama3")};
  // Feature templates (index 2..): each also runs through the reference.
  const std::vector<std::string> features{
      "{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ m.role | upper }}: {{ m.content | trim | tojson }}"
      "{% if loop.first %} (first){% endif %}\n{% endfor %}{% if add_generation_prompt %}>{% endif %}",
      "{%- set ns = namespace(found=false, idx=-1) -%}\n{%- for m in messages[::-1] -%}\n  {%- if not ns.found and "
      "m.role == 'user' -%}{%- set ns.found = true -%}{%- set ns.idx = (messages|length - 1) - loop.index0 -%}"
      "{%- endif -%}\n{%- endfor -%}\nlast user at {{ ns.idx }}; {{ messages[0]['content'][:5] }}|"
      "{{ messages[-1].content.split(' ')[0] }}|{{ messages | length }}",
      "{% for m in messages if m.role != 'system' %}[{{ m.content.strip() ~ '' }}]{% else %}empty{% endfor %}"
      "{{ 'x' if messages[0].role == 'system' else 'y' }}",
  };
  for (const auto& f : features) templates.push_back(make_chat_template(f, "<s>", "</s>", "feature"));

  using Conv = std::vector<ChatMessage>;
  const std::vector<Conv> convs{
      {{"user", "Hello"}},
      {{"system", "You are a helpful assistant."}, {"user", "What is 2+2?"}},
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "Tell me a joke."}},
      {{"user", "First question"}, {"assistant", "First answer"}, {"user", "Second"}, {"assistant", "Second answer"}},
      {{"user", "Think about it"}, {"assistant", "<think>\nLet me reason.\n</think>\n\nThe answer is 42."},
       {"user", "Why?"}, {"assistant", "<think>\nmore\n</think>\n\nBecause."}},
      {{"user", "  padded content \n\n"}, {"assistant", "\n answer with spaces  "}},
      {{"system", "Only system"}},
      {{"user", "Unicode: caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x99\x82 \"quotes\" 'single' \\backslash\\"}},
      {{"user", "Call the tool"}, {"assistant", "Calling."}, {"tool", "{\"result\": 1}"}, {"tool", "second"},
       {"user", "<tool_response>x</tool_response>"}},
  };
  ojson input{{"templates", ojson::array()}, {"cases", ojson::array()}};
  for (const auto& t : templates) input["templates"].push_back({{"template", t.source}, {"bos_token", t.bos_token}, {"eos_token", t.eos_token}});
  struct Case {
    std::size_t tmpl, conv;
    bool gen;
    ojson extra;
  };
  std::vector<Case> cases;
  for (std::size_t ti = 0; ti < templates.size(); ++ti) {
    for (std::size_t ci = 0; ci < convs.size(); ++ci) {
      for (bool gen : {false, true}) {
        cases.push_back({ti, ci, gen, ojson::object()});
        if (ti == 0) {
          cases.push_back({ti, ci, gen, ojson{{"enable_thinking", false}}});
          cases.push_back({ti, ci, gen, ojson{{"enable_thinking", true}}});
        }
      }
    }
  }
  for (const Case& c : cases) {
    ojson msgs = ojson::array();
    for (const auto& m : convs[c.conv]) msgs.push_back({{"role", m.role}, {"content", m.content}});
    input["cases"].push_back({{"template", c.tmpl}, {"messages", msgs}, {"add_generation_prompt", c.gen}, {"extra", c.extra}});
  }
  const fs::path in = tmp_dir() / "chat_input.json", out = tmp_dir() / "chat_ref.json";
  std::ofstream(in) << input.dump();
  fs::remove(out);
  const std::string cmd = "node '" + kJsDir + "/render_chat.mjs' '" + in.string() + "' '" + out.string() + "' > '" +
                          out.string() + ".log' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "reference renderer failed: " << read_text(out.string() + ".log");
  const ojson ref = ojson::parse(read_text(out.string()));
  ASSERT_EQ(ref["outputs"].size(), cases.size());
  std::size_t compared = 0;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const ojson& want = ref["outputs"][k];
    ASSERT_TRUE(want.is_string()) << "reference error for case " << k << ": " << want.dump();
    std::string got;
    try {
      got = render_chat(templates[c.tmpl], convs[c.conv], c.gen, c.extra);
    } catch (const Error& e) {
      ADD_FAILURE() << "case " << k << " threw: " << e.what();
      continue;
    }
    EXPECT_EQ(got, want.get<std::string>()) << "template " << c.tmpl << " conversation " << c.conv
                                            << " add_generation_prompt " << c.gen << " extra " << c.extra.dump();
    ++compared;
  }
  EXPECT_EQ(compared, cases.size());
}

}  // namespace
}  // namespace kvcompact
