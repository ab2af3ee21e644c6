// Writes a SentencePiece-style BPE tokenizer.json (model BPE with byte_fallback, as Hugging Face
// converts Llama 2 / TinyLlama tokenizers) from a llama2.c tokenizer.bin (e.g. stories260K's
// tok512.bin), for tests/hf_tokenizer_test.cpp.
// Usage: node spm_tokenizer_json.mjs TOKENIZER_BIN VOCAB_SIZE legacy|metaspace OUTPUT_JSON
//   legacy:    normalizer Prepend("▁") + Replace(" " -> "▁"), no pre-tokenizer, decoder
//              Replace/ByteFallback/Fuse/Strip (Llama 2 tokenizer.json);
//   metaspace: no normalizer, Metaspace pre-tokenizer (prepend_scheme "first") and decoder.
// Vocabulary: id 0..2 = <unk>, <s>, </s>; pieces with ' ' written as U+2581. Merges: every split
// of a vocabulary piece into two vocabulary pieces, ranked by the merged piece's score (as the
// transformers SentencePiece converter does), then by the ids of the two parts.
import { readFileSync, writeFileSync } from "node:fs";

const [binPath, vocabSizeArg, variant, outPath] = process.argv.slice(2);
if (!outPath || !["legacy", "metaspace"].includes(variant)) {
  console.error("usage: node spm_tokenizer_json.mjs TOKENIZER_BIN VOCAB_SIZE legacy|metaspace OUTPUT_JSON");
  process.exit(2);
}
const buf = readFileSync(binPath);
const n = Number(vocabSizeArg);
let off = 4; // max_token_length
const pieces = [];
const scores = [];
const dec = new TextDecoder("utf-8");
for (let i = 0; i < n; ++i) {
  scores.push(buf.readFloatLE(off));
  const len = buf.readInt32LE(off + 4);
  pieces.push(dec.decode(buf.subarray(off + 8, off + 8 + len)));
  off += 8 + len;
}
const SP = "\u2581";
const special = ["<unk>", "<s>", "</s>"];
const vocab = {};
for (let i = 0; i < n; ++i) {
  const p = i < 3 ? special[i] : pieces[i].replaceAll(" ", SP);
  if (!(p in vocab)) vocab[p] = i;
}
const isByte = (p) => /^<0x[0-9A-F]{2}>$/.test(p);
const order = Object.keys(vocab)
  .filter((p) => vocab[p] >= 3 && !isByte(p))
  .sort((a, b) => scores[vocab[b]] - scores[vocab[a]] || vocab[a] - vocab[b]);
const merges = [];
order.forEach((p, rank) => {
  const chars = Array.from(p);
  const found = [];
  for (let k = 1; k < chars.length; ++k) {
    const l = chars.slice(0, k).join("");
    const r = chars.slice(k).join("");
    if (l in vocab && r in vocab && !special.includes(l) && !special.includes(r) && !isByte(l) && !isByte(r)) {
      found.push([vocab[l], vocab[r], l, r]);
    }
  }
  found.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  for (const f of found) merges.push([rank, f[0], f[1], f[2], f[3]]);
});
const added = special.map((content, id) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
}));
const legacy = variant === "legacy";
const tokenizer = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: added,
  normalizer: legacy
    ? { type: "Sequence", normalizers: [
        { type: "Prepend", prepend: SP },
        { type: "Replace", pattern: { String: " " }, content: SP },
      ] }
    : null,
  pre_tokenizer: legacy ? null : { type: "Metaspace", replacement: SP, prepend_scheme: "first", split: false },
  post_processor: {
    type: "TemplateProcessing",
    single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
    pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
           { SpecialToken: { id: "<s>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
    special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
  },
  decoder: legacy
    ? { type: "Sequence", decoders: [
        { type: "Replace", pattern: { String: SP }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
      ] }
    : { type: "Metaspace", replacement: SP, prepend_scheme: "first", split: false },
  model: {
    type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null,
    fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab,
    merges: merges.map((m) => `${m[3]} ${m[4]}`),
  },
};
writeFileSync(outPath, JSON.stringify(tokenizer, null, 1));
console.log(`${outPath}: ${Object.keys(vocab).length} tokens, ${merges.length} merges`);
