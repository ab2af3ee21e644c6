#!/usr/bin/env python3
"""Memory of kvcompact.hf's compacted transformers cache against the full DynamicCache on a long
WikiText-2 context (SmolLM2-135M-Instruct Q4_1 through transformers, float32).

Prints, for the full DynamicCache and the compacted cache (hf.compact, method am, --ratio):
  - cache tensor bytes (keys + values, plus beta for the compacted cache), and their ratio;
  - resident memory held after the run (RSS now - RSS before the prefill, after gc and
    malloc_trim), each variant in its own fresh process so that neither sees the other's heap;
  - peak RSS growth over the same baseline (RSS sampled every 2 ms by a thread): the prefill's
    activations (and, for the compacted cache, the recorded queries and the compaction's float32
    copies) dominate it, since compaction starts from a full prefill.
Both variants also decode one token over their cache (so the numbers are of a usable cache).

usage: PYTHONPATH=build/python .venv/bin/python bench/hf_cache_memory.py [--tokens 3072] [--ratio 0.1]
       [--threads 2] [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--data .../wiki.test.raw]
"""
import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trim():
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


class PeakSampler:
    """Largest RSS seen by a thread polling /proc/self/statm every 2 ms while running."""

    def __init__(self):
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.002)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_bytes())
        return self.peak


def child(args):
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache
    from transformers.utils import logging as hf_logging

    import kvcompact
    import kvcompact.hf as kh

    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    kvcompact.set_threads(args.threads)
    path = Path(args.model)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    km = kvcompact.Model(str(path))
    ids = km.tokenize(Path(args.data).read_text()[: args.tokens * 8])[: args.tokens]
    if len(ids) < args.tokens:
        sys.exit(f"--data: only {len(ids)} tokens")
    kh.enable(model)
    with torch.no_grad():  # warm-up on a short input, so that the baseline holds torch's one-time allocations
        model(torch.tensor([ids[:32]]), past_key_values=DynamicCache(config=model.config))
    trim()
    before = rss_bytes()
    sampler = PeakSampler()
    with torch.no_grad():
        full = DynamicCache(config=model.config)
        if args.variant == "full":
            model(torch.tensor([ids]), past_key_values=full, logits_to_keep=1)
            cache = full
            nbytes = kh.full_cache_nbytes(cache)
        else:
            with kh.record_queries(model) as rec:
                model(torch.tensor([ids]), past_key_values=full, logits_to_keep=1)
            full_bytes = kh.full_cache_nbytes(full)
            cache = kh.compact(model, full, ratio=args.ratio, method="am", queries=rec)
            del full, rec
            nbytes = cache.nbytes
        trim()
        held_before_decode = rss_bytes() - before
        model(torch.tensor([[ids[-1]]]), past_key_values=cache)
    peak = sampler.stop()
    trim()
    out = {
        "variant": args.variant, "tokens": len(ids), "cache_tensor_bytes": nbytes,
        "rss_held": held_before_decode,
        "peak_rss_growth": peak - before,
    }
    if args.variant != "full":
        out["full_tensor_bytes_seen"] = full_bytes
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=3072)
    ap.add_argument("--ratio", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "wikitext2" / "wiki.test.raw"))
    ap.add_argument("--variant", choices=["full", "compacted"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:
        return child(args)
    res = {}
    for v in ("full", "compacted"):
        cmd = [sys.executable, __file__, "--variant", v, "--tokens", str(args.tokens), "--ratio", str(args.ratio),
               "--threads", str(args.threads), "--model", args.model, "--data", args.data]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{v}: {r.stderr[-2000:]}")
        res[v] = json.loads(r.stdout.strip().splitlines()[-1])
    f, c = res["full"], res["compacted"]
    mib = 1 << 20
    print(f"context: {f['tokens']} tokens, ratio {args.ratio} (method am), float32")
    print(f"{'':<28}{'full DynamicCache':>20}{'compacted (hf)':>20}{'compacted/full':>16}")
    for key, label in (("cache_tensor_bytes", "cache tensor bytes"), ("rss_held", "RSS held after"),
                       ("peak_rss_growth", "peak RSS growth")):
        print(f"{label:<28}{f[key] / mib:>17.2f} MiB{c[key] / mib:>17.2f} MiB{c[key] / max(1, f[key]):>16.4f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
