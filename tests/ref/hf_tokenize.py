"""Reference token ids from the Rust Hugging Face `tokenizers` library (the PyPI package that
transformers uses), for tests/hf_tokenizer_test.cpp.

Usage: hf_tokenize.py INPUT_JSON
  INPUT_JSON: {"tokenizers": [{"name": N, "file": PATH} | {"name": N, "json": STR}, ...],
               "texts_b64": [base64 of the raw UTF-8 bytes, ...],
               "special_b64": [...],          (optional; encoded with add_special_tokens=True)
               "transformers": [{"name": N, "folder": DIR}, ...],   (optional, see below)
               "want_text": true}                   (optional: also "valid" and "nfc", below)
  Each text's bytes are decoded as Python does with errors="replace" (each maximal invalid
  UTF-8 subsequence becomes U+FFFD), the only way invalid UTF-8 reaches the library.
  Output (stdout, JSON): {"results": {N: {"ids": [[...]] (add_special_tokens=False, per text),
                                          "special_ids": [[...]] (add_special_tokens=True)}
                                      | {"error": MESSAGE}},          (the library refused the file)
                          "transformers": {N: {"ids": [[...]] (AutoTokenizer(DIR).encode(text),
                                                            add_special_tokens=True by default),
                                               "bos_token_id": ID or null} | {"error": MESSAGE}},
                          "valid": [each text as decoded], "nfc": [the library's NFC normalizer of it]}
"""
import base64
import json
import sys

import tokenizers


def texts_of(key, data):
    return [base64.b64decode(t).decode("utf-8", errors="replace") for t in data.get(key, [])]


def main():
    data = json.load(open(sys.argv[1], encoding="utf-8"))
    texts = texts_of("texts_b64", data)
    special = texts_of("special_b64", data)
    results = {}
    for spec in data.get("tokenizers", []):
        try:
            if "file" in spec:
                tok = tokenizers.Tokenizer.from_file(spec["file"])
            else:
                tok = tokenizers.Tokenizer.from_str(spec["json"])
            ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)] if texts else []
            sids = [e.ids for e in tok.encode_batch(special, add_special_tokens=True)] if special else []
            results[spec["name"]] = {"ids": ids, "special_ids": sids}
        except Exception as e:  # the library refuses the file: the C++ side must refuse it too
            results[spec["name"]] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    out = {"tokenizers_version": tokenizers.__version__, "results": results, "transformers": {}}
    if data.get("want_text"):
        nfc = tokenizers.normalizers.NFC()
        out["valid"] = texts
        out["nfc"] = [nfc.normalize_str(t) for t in texts]
    if data.get("transformers"):
        import transformers

        for spec in data["transformers"]:
            try:
                t = transformers.AutoTokenizer.from_pretrained(spec["folder"], local_files_only=True)
                out["transformers"][spec["name"]] = {
                    "ids": [t.encode(x) for x in texts],
                    "bos_token_id": t.bos_token_id,
                }
            except Exception as e:
                out["transformers"][spec["name"]] = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
