"""llama.cpp's tokenizer (llama-cpp-python, vocab only) on a GGUF file: the reference for
kvcompact's GGUF tokenizers.

usage: llama_cpp_tokenize.py MODEL.gguf TEXTS.json
TEXTS.json: {"add_special": bool, "texts_hex": [hex of raw bytes, ...]}
Prints JSON {"ids": [[int, ...], ...]} (tokenize with parse_special = True).
"""
import json
import sys

import llama_cpp


def main():
    model, texts = sys.argv[1], sys.argv[2]
    with open(texts, "rb") as f:
        req = json.load(f)
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    out = []
    for t in req["texts_hex"]:
        raw = bytes.fromhex(t)
        out.append(llm.tokenize(raw, add_bos=bool(req["add_special"]), special=True))
    json.dump({"ids": out}, sys.stdout)


if __name__ == "__main__":
    main()
