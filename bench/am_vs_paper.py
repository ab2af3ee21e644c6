#!/usr/bin/env python3
"""Attention Matching per (layer, KV head): kvcompact next to the paper's own code, same run.

For each shape T x n x d (context keys, reference queries, head_dim) this makes one random head
(K, V ~ N(0, 1), Q ~ N(0, 4): peaked attention like real heads; fixed seed), then times, in
interleaved runs, kvcompact.compact_head(K, V, Q, ratio, method="am") and the paper's
HighestAttentionKeysCompaction(score_method='rms', nnls_iters=2, bounds [e^-3, e^3],
c2_method='lsq').compute_compacted_cache(K, V, Q, t) (adamzweiger/compaction, torch on CPU, float32),
with the same thread count on both sides, after one untimed warm-up call each. Prints the medians, their ratio (paper / kvcompact: > 1
means kvcompact is faster), how many kept keys the two share and the largest relative difference of
beta and C2 over the shared keys. --dump DIR times the heads that `kvcompact compact --dump-heads DIR`
wrote (real model heads) instead. Prints figures; no pass/fail.

usage: PYTHONPATH=build/python .venv/bin/python bench/am_vs_paper.py --paper /tmp/paper_compaction
       [--shapes 1024x4096x64,1024x4096x128,4096x16384x64,4096x16384x128] [--ratio 0.1]
       [--runs 3] [--threads 1] [--dump DIR --heads N] [--out-json F]
"""
import argparse
import json
import os
import statistics
import sys
import time

# numpy's own OpenBLAS (used here only to make the data) must not keep spinning threads beside the
# timed code; kvcompact.set_threads and torch.set_num_threads set the timed sides' threads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402


def fail(msg):
    print(f"am_vs_paper: error: {msg}", file=sys.stderr)
    sys.exit(1)


def parse_shapes(text):
    shapes = []
    for part in text.split(","):
        try:
            T, n, d = (int(x) for x in part.lower().split("x"))
        except ValueError:
            fail(f"--shapes: '{part}' is not TxNxD (e.g. 1024x4096x128)")
        if min(T, n, d) < 1:
            fail(f"--shapes: '{part}' has a size below 1")
        shapes.append((T, n, d))
    return shapes


def random_head(T, n, d, seed):
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((T, d), dtype=np.float32)
    V = rng.standard_normal((T, d), dtype=np.float32)
    Q = (2.0 * rng.standard_normal((n, d))).astype(np.float32)
    return f"random {T}x{n}x{d}", K, V, Q, None


def dumped_heads(folder, limit):
    """The dump's heads with the budget t each was compacted to (read before anything is printed)."""
    man_path = os.path.join(folder, "manifest.json")
    if not os.path.exists(man_path):
        fail(f"{man_path}: missing (run `kvcompact compact ... --dump-heads {folder}`)")
    heads = json.load(open(man_path))["heads"]
    heads = heads[: limit] if limit > 0 else heads

    def load():
        for h in heads:
            base = os.path.join(folder, f"L{h['layer']}H{h['kv_head']}_")
            yield (f"L{h['layer']}H{h['kv_head']}",) + tuple(np.load(base + k + ".npy") for k in "KVQ") + (h["t"],)
    return load()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paper", required=True, help="local copy of adamzweiger/compaction (the folder holding compaction/)")
    ap.add_argument("--shapes", default="1024x4096x64,1024x4096x128,4096x16384x64,4096x16384x128")
    ap.add_argument("--ratio", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dump", default="", help="time the heads of a `compact --dump-heads` folder instead")
    ap.add_argument("--heads", type=int, default=0, help="with --dump: the first N heads only (0 = all); each head is "
                    "compacted to the t the dump records, --shapes and --ratio do not apply")
    ap.add_argument("--out-json", default="")
    a = ap.parse_args()
    if not 0.0 < a.ratio <= 1.0:
        fail(f"--ratio {a.ratio} is outside (0, 1]")
    if a.heads < 0:
        fail(f"--heads {a.heads}: give N >= 1, or 0 for all heads")
    if a.runs < 1 or a.threads < 1:
        fail("--runs and --threads must be >= 1")
    if not os.path.isdir(os.path.join(a.paper, "compaction", "algorithms")):
        fail(f"{a.paper}: no compaction/algorithms folder (bring adamzweiger/compaction there)")
    sys.path.insert(0, a.paper)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
    from compare_paper_code import compare_selection, paper_algorithm
    try:
        import torch
        algo = paper_algorithm("am")
    except ImportError as e:
        fail(f"cannot import torch or the paper's code: {e}")
    try:
        import kvcompact
    except ImportError as e:
        fail(f"cannot import kvcompact (PYTHONPATH=build/python?): {e}")
    torch.set_num_threads(a.threads)
    kvcompact.set_threads(a.threads)
    heads = dumped_heads(a.dump, a.heads) if a.dump else (random_head(T, n, d, 7 + i)
                                                          for i, (T, n, d) in enumerate(parse_shapes(a.shapes)))
    print(f"AM per head, ratio {a.ratio}, {a.threads} thread(s) on both sides, median of {a.runs} interleaved runs; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'head':<26} {'T':>5} {'n':>6} {'d':>4} {'t':>5} {'same keys':>11} {'beta rel':>9} {'C2 rel':>9} "
          f"{'kvc s':>8} {'paper s':>8} {'paper/kvc':>9}")
    rows = []
    for name, K, V, Q, t in heads:
        T, d = K.shape
        n = Q.shape[0]
        if t is None:
            t = kvcompact.kept_entries(a.ratio, T)
        Kt, Vt, Qt = (torch.from_numpy(np.ascontiguousarray(x)) for x in (K, V, Q))
        kvcompact.compact_head(K, V, Q, t=t, method="am")  # warm-up on both sides (not timed)
        algo.compute_compacted_cache(Kt, Vt, Qt, t)
        kvc_s, paper_s = [], []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            _, beta, C2, idx = kvcompact.compact_head(K, V, Q, t=t, method="am")
            kvc_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _, pbeta, pC2, pidx = algo.compute_compacted_cache(Kt, Vt, Qt, t)
            paper_s.append(time.perf_counter() - t0)
        shared, beta_rel, c2_rel = compare_selection(idx, beta, C2, pidx, pbeta.double().numpy(), pC2.double().numpy())
        row = {"head": name, "T": T, "n": n, "d": d, "t": t, "same_keys": len(shared),
               "beta_rel": beta_rel, "c2_rel": c2_rel,
               "kvcompact_s": statistics.median(kvc_s), "paper_s": statistics.median(paper_s)}
        row["ratio"] = row["paper_s"] / row["kvcompact_s"]
        rows.append(row)
        print(f"{name:<26} {T:>5} {n:>6} {d:>4} {t:>5} {len(shared):>5}/{t:<5} {row['beta_rel']:>9.2e} "
              f"{row['c2_rel']:>9.2e} {row['kvcompact_s']:>8.4f} {row['paper_s']:>8.4f} {row['ratio']:>8.2f}x",
              flush=True)
    if not rows:
        fail("no heads to time")
    tot_k = sum(r["kvcompact_s"] for r in rows)
    tot_p = sum(r["paper_s"] for r in rows)
    print(f"{len(rows)} heads: kept keys shared {sum(r['same_keys'] for r in rows)}/{sum(r['t'] for r in rows)}; "
          f"total kvcompact {tot_k:.3f} s, paper {tot_p:.3f} s, paper/kvcompact {tot_p / tot_k:.2f}x; "
          f"load average {os.getloadavg()[0]:.1f}")
    if a.out_json:
        with open(a.out_json + ".tmp", "w") as f:
            json.dump({"ratio": a.ratio, "threads": a.threads, "runs": a.runs, "rows": rows}, f, indent=1)
        os.replace(a.out_json + ".tmp", a.out_json)


if __name__ == "__main__":
    main()
