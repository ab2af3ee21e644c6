// Reference token ids from Hugging Face's own JavaScript tokenizer (@huggingface/tokenizers),
// for tests/hf_tokenizer_test.cpp.
// Usage: node hf_tokenize.mjs TOKENIZER_JSON CONFIG_JSON|- INPUT_JSON OUTPUT_JSON
//   INPUT_JSON: {"texts": [...], "special_texts": [...]}
//   OUTPUT_JSON: {"ids": [[...], ...]            (add_special_tokens = false, one per text),
//                 "special_ids": [[...], ...]    (add_special_tokens = true, one per special_text),
//                 "nfc": [...]}                  (String.prototype.normalize('NFC') of each text)
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokPath, cfgPath, inPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node hf_tokenize.mjs TOKENIZER_JSON CONFIG_JSON|- INPUT_JSON OUTPUT_JSON");
  process.exit(2);
}
const tokenizerJson = JSON.parse(readFileSync(tokPath, "utf8"));
const config = cfgPath === "-" ? {} : JSON.parse(readFileSync(cfgPath, "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, config);
const input = JSON.parse(readFileSync(inPath, "utf8"));
const texts = input.texts ?? [];
const specialTexts = input.special_texts ?? [];
const ids = texts.map((t) => (t.length === 0 ? [] : tokenizer.encode(t, { add_special_tokens: false }).ids));
const specialIds = specialTexts.map((t) => tokenizer.encode(t, { add_special_tokens: true }).ids);
const nfc = input.want_nfc ? texts.map((t) => t.normalize("NFC")) : [];
writeFileSync(outPath, JSON.stringify({ ids, special_ids: specialIds, nfc }));
