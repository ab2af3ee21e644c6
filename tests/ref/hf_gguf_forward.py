"""Hugging Face transformers on a GGUF file (gguf_file=, dequantized to float32): the reference
forward for kvcompact on real models. Token ids come from the caller, so tokenizers play no part.

usage: hf_gguf_forward.py MODEL.gguf REQUEST.json OUT_PREFIX
REQUEST.json:
  {"logits": [{"ids": [...], "positions": [p, ...]}, ...],   # logits rows to return
   "greedy": [{"ids": [...], "steps": N}, ...],             # greedy continuations (argmax, no stop)
   "windows": [[...ids...], ...]}                           # NLL of each window (nats/token)
Writes OUT_PREFIX.logits.f32 (float32 rows in request order, vocab floats each) and prints JSON
{"vocab": V, "greedy": [[ids]...], "window_nll_sum": [...], "window_tokens": [...]}.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def main():
    path, req_path, out_prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(req_path) as f:
        req = json.load(f)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path), dtype=torch.float32
    )
    model.eval()
    result = {"vocab": None, "greedy": [], "window_nll_sum": [], "window_tokens": []}
    rows = []
    with torch.no_grad():
        for item in req.get("logits", []):
            ids = torch.tensor([item["ids"]], dtype=torch.long)
            # Only the requested rows through the classifier (a 1-D logits_to_keep tensor).
            keep = torch.tensor(item["positions"], dtype=torch.long)
            logits = model(ids, logits_to_keep=keep).logits[0]
            result["vocab"] = int(logits.shape[-1])
            for r in range(len(item["positions"])):
                rows.append(logits[r].float().numpy())
        for item in req.get("greedy", []):
            ids = torch.tensor([item["ids"]], dtype=torch.long)
            out = model(ids, use_cache=True)
            past = out.past_key_values
            nxt = int(out.logits[0, -1].argmax())
            gen = [nxt]
            for _ in range(item["steps"] - 1):
                out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = int(out.logits[0, -1].argmax())
                gen.append(nxt)
            result["greedy"].append(gen)
        for w in req.get("windows", []):
            ids = torch.tensor([w], dtype=torch.long)
            logits = model(ids).logits[0, :-1].double()
            lp = torch.log_softmax(logits, dim=-1)
            tgt = ids[0, 1:]
            nll = -lp[torch.arange(len(tgt)), tgt].sum()
            result["window_nll_sum"].append(float(nll))
            result["window_tokens"].append(len(tgt))
    np.asarray(rows, dtype=np.float32).tofile(out_prefix + ".logits.f32")
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
