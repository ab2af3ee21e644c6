"""llama.cpp (llama-cpp-python) perplexity windows on a GGUF file, the same token ids as the caller.

usage: llama_cpp_nll.py MODEL.gguf REQUEST.json     REQUEST.json: {"windows": [[ids], ...]}
Prints JSON {"window_nll_sum": [...], "window_tokens": [...]} (nats; token t+1 predicted from
positions 0..t of its own window).
"""
import json
import os
import sys

import numpy as np
import llama_cpp


def main():
    path, req_path = sys.argv[1], sys.argv[2]
    with open(req_path) as f:
        req = json.load(f)
    n = max(len(w) for w in req["windows"])
    llm = llama_cpp.Llama(model_path=path, n_ctx=n, n_batch=n, n_ubatch=n, logits_all=True, verbose=False,
                          n_threads=int(os.environ.get("OMP_NUM_THREADS", "2")))
    sums, counts = [], []
    for w in req["windows"]:
        llm.reset()
        llm.eval(w)
        logits = np.asarray(llm.scores[: len(w) - 1], dtype=np.float64)
        m = logits.max(axis=1, keepdims=True)
        lse = (m[:, 0] + np.log(np.exp(logits - m).sum(axis=1)))
        tgt = np.asarray(w[1:])
        sums.append(float((lse - logits[np.arange(len(tgt)), tgt]).sum()))
        counts.append(len(tgt))
    json.dump({"window_nll_sum": sums, "window_tokens": counts}, sys.stdout)


if __name__ == "__main__":
    main()
