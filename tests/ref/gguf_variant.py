"""Writes a copy of a GGUF file with some metadata changed (for tokenizer-flag tests against
llama.cpp on real vocabularies).

usage: gguf_variant.py IN.gguf OUT.gguf CHANGES.json
CHANGES.json: {"bool": {key: value}, "string": {key: value}, "uint32": {key: value},
               "token_type": {id: type}, "append_tokens": [[text, type, score], ...], "drop": [key, ...]}
A file without tokenizer.ggml.tokens is copied without a vocabulary.
"""
import json
import sys

import numpy as np
import gguf


def main():
    src, dst, changes_path = sys.argv[1:4]
    with open(changes_path) as f:
        ch = json.load(f)
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    has_vocab = "tokenizer.ggml.tokens" in r.fields
    tokens = list(r.fields["tokenizer.ggml.tokens"].contents()) if has_vocab else []
    types = list(r.fields["tokenizer.ggml.token_type"].contents()) if has_vocab else []
    scores = list(r.fields["tokenizer.ggml.scores"].contents()) if "tokenizer.ggml.scores" in r.fields else None
    for k, v in ch.get("token_type", {}).items():
        types[int(k)] = int(v)
    for text, typ, score in ch.get("append_tokens", []):
        tokens.append(text)
        types.append(int(typ))
        if scores is not None:
            scores.append(float(score))
    skip = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture",
            "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"}
    skip |= set(ch.get("drop", []))
    skip |= set(ch.get("bool", {})) | set(ch.get("string", {})) | set(ch.get("uint32", {}))
    for k, field in r.fields.items():
        if k in skip:
            continue
        t = field.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            w.add_array(k, list(field.contents()))
        else:
            w.add_key_value(k, field.contents(), t)
    if has_vocab:
        w.add_token_list(tokens)
        w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    for k, v in ch.get("uint32", {}).items():
        w.add_uint32(k, int(v))
    for k, v in ch.get("bool", {}).items():
        w.add_bool(k, bool(v))
    for k, v in ch.get("string", {}).items():
        w.add_string(k, v)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=list(reversed([int(x) for x in t.shape])),
                     raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
