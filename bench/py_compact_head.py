"""Time of kvcompact.compact_head from Python vs the C++ library's own call on the same heads.

Runs `kvcompact compact --dump-heads` (one thread): the CLI writes every head's K, V, Q and the
seconds its compact_head call took (timed in C++, each head alone, once). Then times
kvcompact.compact_head on the same arrays (one thread; first call and best of --runs) and prints
the per-head times, their ratios and the fixed per-call cost on a 2-entry head. Prints figures; no pass/fail.

usage: PYTHONPATH=build/python .venv/bin/python bench/py_compact_head.py [--model F]
       [--context TEXTFILE] [--chars N] [--ratio R] [--method SPEC] [--runs N]
"""
import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import kvcompact

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--context", default=str(ROOT.parent / "shared" / "data" / "tinystories" / "tinystories_val_head.txt"))
    ap.add_argument("--chars", type=int, default=2500, help="characters of the context file used")
    ap.add_argument("--ratio", type=float, default=0.1)
    ap.add_argument("--method", default="am")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cli", default=str(ROOT / "build" / "kvcompact"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Path(tmp) / "context.txt"
        ctx.write_text(Path(a.context).read_bytes().decode()[: a.chars])
        subprocess.run([a.cli, "compact", "--model", a.model, "--context", str(ctx), "--ratio", str(a.ratio),
                        "--method", a.method, "-o", f"{tmp}/c.kvc", "--dump-heads", f"{tmp}/heads", "--threads", "1"],
                       check=True, capture_output=True)
        manifest = json.loads(Path(f"{tmp}/heads/manifest.json").read_text())
        kvcompact.set_threads(1)
        cpp, py, first = [], [], []
        for h in manifest["heads"]:
            base = f"{tmp}/heads/L{h['layer']}H{h['kv_head']}_"
            K, V, Q = (np.load(base + k + ".npy") for k in "KVQ")
            runs = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                kvcompact.compact_head(K, V, Q, ratio=a.ratio, method=a.method)
                runs.append(time.perf_counter() - t0)
            cpp.append(h["seconds"])
            first.append(runs[0])
            py.append(min(runs))
        h0 = manifest["heads"][0]
        print(f"{len(py)} heads of T={h0['T']}, n={h0['n_queries']}, d={manifest['head_dim']}, method {manifest['method']}, "
              f"ratio {a.ratio}: C++ median {np.median(cpp) * 1e3:.3f} ms/head, Python median {np.median(py) * 1e3:.3f} ms/head, "
              f"sum ratio Python/C++ {sum(py) / sum(cpp):.3f} (best of {a.runs}), {sum(first) / sum(cpp):.3f} (first call; "
              f"the C++ figure is one call per head)")
        tiny = [np.ones((2, 8), np.float32)] * 3
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            kvcompact.compact_head(*tiny, t=1, method="recent")
        print(f"fixed cost per call (T=2, d=8, 'recent'): {(time.perf_counter() - t0) / n * 1e6:.1f} us")


if __name__ == "__main__":
    main()
