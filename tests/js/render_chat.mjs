// Reference chat-template renderings from @huggingface/jinja (the renderer Hugging Face's
// JavaScript libraries use), for tests/chat_template_test.cpp.
// Usage: node render_chat.mjs INPUT_JSON OUTPUT_JSON
//   INPUT_JSON: {"templates": [{"template": "...", "bos_token": "...", "eos_token": "..."}],
//                "cases": [{"template": i, "messages": [...], "add_generation_prompt": bool,
//                           "extra": {...}}]}
//   OUTPUT_JSON: {"outputs": ["..." or {"error": "..."}]}
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [inPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node render_chat.mjs INPUT_JSON OUTPUT_JSON");
  process.exit(2);
}
const input = JSON.parse(readFileSync(inPath, "utf8"));
const templates = input.templates.map((t) => ({ ...t, compiled: new Template(t.template) }));
const outputs = input.cases.map((c) => {
  const t = templates[c.template];
  try {
    return t.compiled.render({
      messages: c.messages,
      add_generation_prompt: c.add_generation_prompt,
      bos_token: t.bos_token,
      eos_token: t.eos_token,
      ...(c.extra ?? {}),
    });
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
});
writeFileSync(outPath, JSON.stringify({ outputs }));
