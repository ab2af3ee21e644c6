"""Quick start: compact a long article's KV cache with Attention Matching, ask questions over it,
and compare with the full cache (docs/python_quickstart.md shows a transcript).

usage: PYTHONPATH=build/python .venv/bin/python examples/quickstart.py
       [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--article ../shared/data/quality/...jsonl]
       [--context-tokens 1024] [--ratio 0.1] [--hf]
--hf also continues the compacted cache in Hugging Face transformers (kvcompact.hf).
"""
import argparse
import html
import json
import re
import time
from pathlib import Path

import numpy as np

import kvcompact

ROOT = Path(__file__).resolve().parents[1]


def quality_article(path: Path):
    """Title, plain text and multiple-choice questions of the first QuALITY article in a JSONL file."""
    d = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    raw = "".join(d["article"])
    text = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    text = re.sub(r"[ \t]*\n[ \t\n]*", "\n", re.sub(r"[ \t]+", " ", text)).strip()
    questions = []
    for i in range(1, 100):
        if f"question{i}" not in d:
            break
        options = [d[f"question{i}option{j}"] for j in range(1, 5)]
        questions.append((d[f"question{i}"], options, int(d[f"question{i}_gold_label"])))
    return d["title"], text, questions


# SmolLM2-Instruct's chat form (its GGUF template): the article opens the user turn, so the
# compacted context is "<|im_start|>user\n" + article and the question closes the turn verbatim.
CONTEXT_HEAD = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
QUESTION = "\n\n{question}<|im_end|>\n<|im_start|>assistant\n"


def answer_nll(model, cache, prompt_ids, answer_ids):
    """Mean NLL (nats/token) of answer_ids after the cache and prompt_ids (teacher-forced)."""
    seq = list(prompt_ids) + list(answer_ids)
    rows = model.logits(seq, cache=cache).astype(np.float64)[len(prompt_ids) - 1 : len(seq) - 1]
    rows -= rows.max(axis=1, keepdims=True)
    logp = rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))
    return float(-np.mean(logp[np.arange(len(answer_ids)), answer_ids]))


def choice(model, cache, question, options):
    """The option (1-4) whose text the model finds most likely as the answer (qa-eval's rule:
    highest total log-likelihood of the option's tokens)."""
    prompt = model.tokenize(QUESTION.format(question=question), add_bos=False)
    scores = []
    for o in options:
        ids = model.tokenize(o, add_bos=False)
        scores.append(-answer_nll(model, cache, prompt, ids) * len(ids))
    return int(np.argmax(scores)) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--article", default=str(ROOT.parent / "shared" / "data" / "quality" / "quality_example_one_article.jsonl"))
    ap.add_argument("--context-tokens", type=int, default=1024)
    ap.add_argument("--ratio", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hf", action="store_true")
    a = ap.parse_args()
    kvcompact.set_threads(a.threads)

    m = kvcompact.Model(a.model)
    title, text, questions = quality_article(Path(a.article))
    head = m.tokenize(CONTEXT_HEAD)
    ids = head + m.tokenize(text, add_bos=False)[: a.context_tokens - len(head)]
    print(f"{Path(a.model).name}: {m.config['n_layers']} layers x {m.config['n_kv_heads']} KV heads; "
          f"article '{title}', first {len(ids)} tokens")

    full = m.new_cache()
    t0 = time.perf_counter()
    m.forward(ids, full, logits="none")
    print(f"full cache: {full.entries} entries, {full.bytes / 2**20:.1f} MiB (prefill {time.perf_counter() - t0:.1f} s)")
    caches = {"full": full}
    for method in ("am", "snapkv"):
        t0 = time.perf_counter()
        c = m.compact(ids, ratio=a.ratio, method=method)
        caches[method] = c
        print(f"{method:6s} at ratio {a.ratio}: {c.kept_entries} entries, {c.cache_bytes / 2**20:.2f} MiB "
              f"({c.cache_bytes / full.bytes:.1%} of full; {time.perf_counter() - t0:.1f} s incl. prefill)")

    print("\nmultiple choice (the option text with the highest log-likelihood):")
    print("question" + " " * 52 + "gold  " + "  ".join(f"{k:6s}" for k in caches))
    agree = {k: 0 for k in caches}
    right = {k: 0 for k in caches}
    for q, options, gold in questions:
        picks = {k: choice(m, c, q, options) for k, c in caches.items()}
        for k in caches:
            agree[k] += picks[k] == picks["full"]
            right[k] += picks[k] == gold
        print(f"{q[:58]:58s}  {gold:<4d}  " + "  ".join(f"{picks[k]:<6d}" for k in caches))
    print("correct: " + ", ".join(f"{k} {right[k]}/{len(questions)}" for k in caches) +
          "; same option as the full cache: " + ", ".join(f"{k} {agree[k]}/{len(questions)}" for k in caches if k != "full"))

    q = questions[0][0]
    prompt = QUESTION.format(question=q)
    print(f"\nfree answer to: {q}")
    full_c = m.compact(ids, ratio=1.0, method="recent")  # every entry kept: the full cache as a CompactedCache
    for name, c in (("full", full_c), ("am", caches["am"]), ("snapkv", caches["snapkv"])):
        r = m.generate(prompt, steps=40, cache=c)
        print(f"  {name:6s}: {m.detokenize(r['generated']).strip()!r}")

    # teacher-forced: how well does each compacted cache predict the full cache's own answer?
    answer = m.generate(prompt, steps=40, cache=full_c)["generated"]
    p_ids = m.tokenize(prompt, add_bos=False)
    for name, c in (("full", full), ("am", caches["am"]), ("snapkv", caches["snapkv"])):
        print(f"  NLL of the full cache's answer under {name:6s}: {answer_nll(m, c, p_ids, answer):.3f} nats/token")

    if a.hf:
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        from kvcompact import hf as kvc_hf

        hf_logging.disable_progress_bar()

        hf = AutoModelForCausalLM.from_pretrained(str(Path(a.model).parent), gguf_file=Path(a.model).name,
                                                  dtype=torch.float32)
        cache = kvc_hf.from_kvcompact(caches["am"], hf)  # (C1, beta, C2) per head, ragged, in HF's layout
        # generate() gets the context ids (already in the cache, not run again) and then the new ones
        inp = torch.tensor([ids + p_ids])
        out = hf.generate(inp, attention_mask=torch.ones_like(inp), past_key_values=cache, max_new_tokens=40,
                          do_sample=False)
        hf_answer = out[0, len(ids) + len(p_ids):].tolist()
        native = m.generate(prompt, steps=40, cache=caches["am"])["generated"]
        n = min(len(hf_answer), len(native))
        print(f"\ntransformers over the AM cache: {m.detokenize(hf_answer).strip()!r}")
        print(f"same greedy tokens as kvcompact's own forward over that cache: {hf_answer[:n] == native[:n]} "
              f"({n} tokens compared)")


if __name__ == "__main__":
    main()
