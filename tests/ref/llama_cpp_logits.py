"""llama.cpp (llama-cpp-python) logits on a GGUF file with an F32 KV cache, for the caller's ids.

usage: llama_cpp_logits.py MODEL.gguf REQUEST.json OUT_PREFIX
REQUEST.json: {"logits": [{"ids": [...], "positions": [p, ...]}, ...]}
Writes OUT_PREFIX.llama.f32 (float32 rows in request order, vocab floats each) and prints JSON
{"vocab": V}. The KV cache is F32 (llama.cpp defaults to F16, which alone moves logits ~1e-3).
"""
import json
import os
import sys

import numpy as np
import llama_cpp


def main():
    path, req_path, out_prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(req_path) as f:
        req = json.load(f)
    n = max(len(c["ids"]) for c in req["logits"])
    llm = llama_cpp.Llama(model_path=path, n_ctx=n, n_batch=n, n_ubatch=n, logits_all=True, verbose=False,
                          n_threads=int(os.environ.get("OMP_NUM_THREADS", "2")),
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    rows = []
    for c in req["logits"]:
        llm.reset()
        llm.eval(c["ids"])
        scores = np.asarray(llm.scores[: len(c["ids"])], dtype=np.float32)
        for p in c["positions"]:
            rows.append(scores[p])
    np.asarray(rows, dtype=np.float32).tofile(out_prefix + ".llama.f32")
    json.dump({"vocab": int(llm.n_vocab())}, sys.stdout)


if __name__ == "__main__":
    main()
