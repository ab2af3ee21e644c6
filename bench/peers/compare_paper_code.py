#!/usr/bin/env python3
"""kvcompact's Attention Matching against the paper's own code (adamzweiger/compaction, a local copy
that is never committed), per (layer, KV head), on the same cache and reference queries.

  kvcompact compact --model M --context ctx.txt --ratio 0.1 --method am -o am.kvc --dump-heads DIR_AM
  kvcompact compact --model M --context ctx.txt --ratio 0.1 --method am:select=omp,refit=bounded -o omp.kvc --dump-heads DIR_OMP
  kvcompact compact --model M --context ctx.txt --ratio 0.1 \
    --method am:select=omp,refit=bounded,schedule=progressive,drop=-7,iters=0,lo=-27.631021115928547,hi=7 \
    -o best.kvc --dump-heads DIR_BEST
  bench/peers/compare_paper_code.py --paper /tmp/paper_compaction --dump DIR_AM --algo am [--heads N]
  bench/peers/compare_paper_code.py --paper /tmp/paper_compaction --dump DIR_OMP --algo omp [--heads N]
  bench/peers/compare_paper_code.py --paper /tmp/paper_compaction --dump DIR_BEST --algo omp-best [--heads N]

For each head in DIR (K, V, reference queries Q and kvcompact's selected / beta / C2 / seconds, as
`compact --dump-heads` writes them) runs the paper's HighestAttentionKeysCompaction(score_method=
'rms', nnls_iters=2, bounds [e^-3, e^3], c2_method='lsq') (--algo am) or OMPCompaction(nnls_iters=2,
same bounds) (--algo omp), or the paper's best OMP configuration (nnls_iters=0, upper bound e^7,
drop_key_beta_cutoff=-7, DEFAULT_PROGRESSIVE_SCHEDULE; --algo omp-best) on CPU torch (float32) and prints: keys selected by both (of t), the max
relative difference of beta (|b1 - b2|_max / |b_paper|_max over the shared keys) and of C2 (the same,
rows of the shared keys), and both times per head.

Downstream (--kvc, --model, --continuation; all heads): the .kvc file written by the same
`compact` call as the dump, the model it was made for and a text that follows the context. Loads
that GGUF in transformers (float32), prefills the cache's context ids (CompactedCache.context_tokens)
and scores the continuation (its first --continuation-tokens ids, tokenized by kvcompact without
BOS) teacher-forced at positions T.. over three caches: the full one, kvcompact's (the .kvc file,
through kvcompact.hf.from_kvcompact) and the paper's (its C1 / beta / C2 of every head,
kvcompact.hf.make_cache); the first continuation token is scored from the full prefill's last
logits on all three. Prints the full NLL and both delta NLLs (nats/token), and kvcompact's own
native NLL over the same .kvc as a check of the transformers path. A .kvc whose kept keys are not
the dump's: one-line error.

A missing copy or dump: one-line error, exit 1.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# compare_kvpress first: importing it turns off the GGUF loader's tqdm bars (before transformers).
from compare_kvpress import check_writable, continuation_nll, load_peer_model  # noqa: E402


def fail(msg):
    print(f"compare_paper_code: error: {msg}", file=sys.stderr)
    sys.exit(1)


def paper_algorithm(algo):
    """The paper's compaction object for --algo am | omp | omp-best (its code must be importable)."""
    lo, hi = math.exp(-3), math.exp(3)
    if algo == "am":
        from compaction.algorithms.highest_attention_keys import HighestAttentionKeysCompaction
        return HighestAttentionKeysCompaction(nnls_iters=2, nnls_lower_bound=lo, nnls_upper_bound=hi,
                                              score_method="rms", c2_method="lsq", beta_method="nnls")
    from compaction.algorithms.omp import DEFAULT_PROGRESSIVE_SCHEDULE, OMPCompaction
    if algo == "omp":
        return OMPCompaction(nnls_iters=2, nnls_lower_bound=lo, nnls_upper_bound=hi, c2_method="lsq")
    # the paper's best OMP (evaluation/configs/algorithms/ablation.py), without on-policy queries
    return OMPCompaction(nnls_iters=0, nnls_upper_bound=math.exp(7), drop_key_beta_cutoff=-7,
                         c2_method="lsq", progressive_schedule=DEFAULT_PROGRESSIVE_SCHEDULE)


def compare_selection(sel, beta, C2, pidx, pbeta, pC2):
    """Keys kept by both (sorted), and the max relative difference of beta and of C2 over them
    (|ours - paper|_max / |paper|_max; nan when no key is shared). sel / pidx: kept key indices,
    beta / pbeta: [t], C2 / pC2: [t, d], each in its side's own order."""
    import numpy as np
    pidx = [int(i) for i in pidx]
    sel = [int(i) for i in sel]
    shared = sorted(set(sel) & set(pidx))
    if not shared:
        return shared, float("nan"), float("nan")
    ours = {j: i for i, j in enumerate(sel)}
    theirs = {j: i for i, j in enumerate(pidx)}
    bo = np.array([beta[ours[j]] for j in shared], np.float64)
    bp = np.array([pbeta[theirs[j]] for j in shared], np.float64)
    co = np.stack([np.asarray(C2[ours[j]], np.float64) for j in shared])
    cp = np.stack([np.asarray(pC2[theirs[j]], np.float64) for j in shared])
    brel = float(np.abs(bo - bp).max() / max(np.abs(bp).max(), 1e-30))
    crel = float(np.abs(co - cp).max() / max(np.abs(cp).max(), 1e-30))
    return shared, brel, crel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paper", required=True, help="local copy of adamzweiger/compaction (the folder holding compaction/)")
    ap.add_argument("--dump", required=True)
    ap.add_argument("--algo", choices=["am", "omp", "omp-best"], default="am")
    ap.add_argument("--heads", type=int, default=0, help="first N heads only (0 = all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out-json", default="")
    ap.add_argument("--kvc", default="", help="the .kvc written with the dump (downstream delta NLL of both)")
    ap.add_argument("--model", default="", help="the GGUF the .kvc was made for (with --kvc)")
    ap.add_argument("--continuation", default="", help="text that follows the context (with --kvc)")
    ap.add_argument("--continuation-tokens", type=int, default=256)
    a = ap.parse_args()
    downstream = bool(a.kvc or a.model or a.continuation)
    if a.threads < 1:
        fail(f"--threads {a.threads}: give 1 or more")
    if a.out_json:
        check_writable(a.out_json, "--out-json")
    if downstream:
        for flag, v in (("--kvc", a.kvc), ("--model", a.model), ("--continuation", a.continuation)):
            if not v:
                fail(f"{flag} is needed with --kvc / --model / --continuation (the downstream delta NLL)")
            if not os.path.isfile(v):
                fail(f"{v}: not found or not a file ({flag})")
        if a.heads != 0:
            fail("the downstream delta NLL needs every head: drop --heads")
        if a.continuation_tokens < 2:
            fail(f"--continuation-tokens {a.continuation_tokens}: give at least 2")
    if not os.path.isdir(os.path.join(a.paper, "compaction", "algorithms")):
        fail(f"{a.paper}: no compaction/algorithms folder (bring adamzweiger/compaction there)")
    man_path = os.path.join(a.dump, "manifest.json")
    if not os.path.exists(man_path):
        fail(f"{man_path}: missing (run `kvcompact compact ... --dump-heads {a.dump}`)")
    sys.path.insert(0, a.paper)
    try:
        import torch
        algo = paper_algorithm(a.algo)
    except ImportError as e:
        fail(f"cannot import the paper's code or torch: {e}")
    torch.set_num_threads(a.threads)
    try:
        man = json.load(open(man_path))
        man["method"], man["ratio"], [(h["layer"], h["kv_head"], h["T"], h["n_queries"], h["seconds"])
                                      for h in man["heads"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{man_path}: not a `compact --dump-heads` manifest ({type(e).__name__}: {e})")
    if a.heads < 0:
        fail(f"--heads {a.heads}: give N >= 1, or 0 for all heads")
    spec = man.get("method", "")
    want = {"am": lambda m: m.startswith("am") and "select=omp" not in m,
            "omp": lambda m: "select=omp" in m and "refit=bounded" in m and "drop=" not in m,
            "omp-best": lambda m: "select=omp" in m and "refit=bounded" in m and "drop=-7" in m
                                  and "schedule=progressive" in m and "iters=0" in m and "hi=7" in m}[a.algo]
    if not want(spec):
        fail(f"{man_path}: the dump is of method '{spec}', which does not run the configuration --algo {a.algo} "
             f"compares against (see the usage lines at the top of this script)")
    heads = man["heads"][: a.heads] if a.heads > 0 else man["heads"]
    # The downstream inputs are checked before the per-head work (they can fail in many ways).
    prepared = downstream_prepare(a, man) if downstream else None
    rows = []
    paper_heads = {}  # (layer, kv_head) -> the paper's (C1, beta, C2), for the downstream NLL
    print(f"method {man['method']} (kvcompact) vs paper's {type(algo).__name__}, ratio {man['ratio']}")
    print(f"{'head':<7} {'T':>5} {'n':>6} {'t':>4} {'same keys':>10} {'beta rel':>9} {'C2 rel':>9} {'kvc s':>8} {'paper s':>8}")
    for h in heads:
        K, V, Q, sel, beta, C2 = load_head(a.dump, h)
        K, V, Q = torch.from_numpy(K), torch.from_numpy(V), torch.from_numpy(Q)
        sel = sel.tolist()
        t = len(sel)
        torch.manual_seed(0)  # the paper's NNLS step size comes from a torch.randn power iteration
        t0 = time.time()
        pC1, pbeta, pC2, pidx = algo.compute_compacted_cache(K, V, Q, t)
        secs = time.time() - t0
        paper_heads[(h["layer"], h["kv_head"])] = (pC1.float().numpy(), pbeta.float().numpy(), pC2.float().numpy())
        shared, brel, crel = compare_selection(sel, beta, C2, pidx, pbeta.double().numpy(), pC2.double().numpy())
        name = f"L{h['layer']}H{h['kv_head']}"
        print(f"{name:<7} {h['T']:>5} {h['n_queries']:>6} {t:>4} {len(shared):>6}/{t:<3} {brel:>9.2e} {crel:>9.2e} {h['seconds']:>8.4f} {secs:>8.4f}")
        rows.append({"head": name, "t": t, "same_keys": len(shared), "beta_rel": brel, "c2_rel": crel,
                     "kvcompact_seconds": h["seconds"], "paper_seconds": secs})
    n = len(rows)
    tk = sum(r["kvcompact_seconds"] for r in rows); tp = sum(r["paper_seconds"] for r in rows)
    same = sum(r["same_keys"] for r in rows); tot = sum(r["t"] for r in rows)
    full = sum(1 for r in rows if r["same_keys"] == r["t"])
    same_c2 = [r["c2_rel"] for r in rows if r["same_keys"] == r["t"]]
    same_text = f"{max(same_c2):.2e}" if same_c2 else "no such head"
    print(f"\n{n} heads: {full} with identical key sets, {same}/{tot} keys shared; max beta rel "
          f"{max(r['beta_rel'] for r in rows):.2e}, max C2 rel {max(r['c2_rel'] for r in rows):.2e} (heads with "
          f"identical keys: {same_text}); "
          f"time per head kvcompact {tk / n:.4f} s, paper {tp / n:.4f} s (ratio {tp / max(tk, 1e-12):.2f}); "
          f"load average {os.getloadavg()[0]:.1f}")
    result = {"method": man["method"], "ratio": man["ratio"], "rows": rows}
    if downstream:
        result["downstream"] = downstream_nll(a, man, paper_heads, prepared, type(algo).__name__)
    if a.out_json:
        try:
            with open(a.out_json, "w") as f:
                json.dump(result, f, indent=1)
        except OSError as e:
            fail(f"--out-json {a.out_json}: {e}")


def load_head(dump, h, parts=("K", "V", "Q", "selected", "beta", "C2")):
    """The arrays `parts` of manifest entry h as `compact --dump-heads` writes them (by default
    K [T, d], V [T, d], Q [n, d], selected [t], beta [t], C2 [t, d]); exits with an error naming the
    file that is missing or bad."""
    import numpy as np
    base = os.path.join(dump, f"L{h['layer']}H{h['kv_head']}_")
    out = []
    for part in parts:
        try:
            out.append(np.load(base + part + ".npy"))
        except (OSError, ValueError) as e:
            fail(f"{base}{part}.npy: cannot read it ({e})")
    return tuple(out)


def downstream_prepare(a, man):
    """Loads and checks what the downstream NLL needs before any per-head work: kvcompact's model,
    the .kvc (made for that model, holding exactly the dump's kept keys, beta and C2, i.e. written by
    the same `compact` call), its context ids, the continuation ids, and transformers' model."""
    import numpy as np
    import torch
    try:
        import kvcompact
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        fail(f"the downstream NLL needs kvcompact's Python package (PYTHONPATH=build/python) and transformers: {e}")
    try:
        native = kvcompact.Model(a.model)
        comp = native.load_cache(a.kvc)
    except kvcompact.Error as e:
        fail(str(e))
    if comp.method != man["method"]:
        fail(f"{a.kvc}: made with method '{comp.method}', the dump with '{man['method']}' (write both with one `compact` call)")
    for h in man["heads"]:
        l, g = h["layer"], h["kv_head"]
        K, sel, beta, C2 = load_head(a.dump, h, ("K", "selected", "beta", "C2"))
        c1, b, c2 = (np.asarray(x) for x in comp.head(l, g))
        same = (c1.shape[0] == len(sel) and np.allclose(c1, K[sel], rtol=1e-5, atol=1e-5)
                and np.allclose(b, beta, rtol=1e-5, atol=1e-5) and np.allclose(c2, C2, rtol=1e-5, atol=1e-5))
        if not same:
            fail(f"{a.kvc}: head L{l}H{g} does not hold the keys, beta and C2 of {a.dump} "
                 f"(write both with one `compact` call)")
    ctx = list(comp.context_tokens)
    if int(comp.next_position) != len(ctx):
        fail(f"{a.kvc}: next_position {comp.next_position} differs from its {len(ctx)} context tokens")
    try:
        text = open(a.continuation, encoding="utf-8").read()
    except UnicodeDecodeError as e:
        fail(f"{a.continuation}: not UTF-8 text ({e})")
    cont = native.tokenize(text, add_bos=False)[: a.continuation_tokens]
    if len(cont) < 2:
        fail(f"{a.continuation}: fewer than 2 tokens")
    try:
        model, _ = load_peer_model(torch, AutoModelForCausalLM, a.model)
    except Exception as e:  # transformers' GGUF loader raises many kinds
        fail(f"{a.model}: transformers cannot load it as a GGUF model ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    return native, comp, ctx, cont, model


def downstream_nll(a, man, paper_heads, prepared, paper_name):
    """Continuation NLL (nats/token) over the full cache, kvcompact's .kvc and the paper's C1 / beta /
    C2, all in transformers on the same GGUF and ids; plus kvcompact's native NLL of its .kvc."""
    import numpy as np
    import torch
    from kvcompact import hf as kvhf
    from transformers import DynamicCache

    native, comp, ctx, cont, model = prepared
    T = len(ctx)
    with torch.no_grad():
        full_cache = DynamicCache()
        first = model(input_ids=torch.tensor([ctx]), past_key_values=full_cache, logits_to_keep=1).logits[0, -1]
        full = continuation_nll(torch, model, full_cache, first, cont, T)
        kvc = continuation_nll(torch, model, kvhf.from_kvcompact(comp, model), first, cont, T)
        heads = []
        for l in range(comp.n_layers):
            lh = []
            for g in range(comp.n_kv_heads):
                c1, beta, c2 = paper_heads[(l, g)]  # keys in kvcompact's layout -> transformers'
                lh.append((kvhf.keys_to_half_split(c1, comp.rope_style), beta, c2))
            heads.append(lh)
        paper = continuation_nll(torch, model, kvhf.make_cache(model, heads, T), first, cont, T)
    # kvcompact's own forward over its .kvc: the first token from its full prefill's last logits
    # (CompactedCache.last_logits), the rest from Model.logits over the cache.
    lg = np.asarray(native.logits(cont[:-1], cache=comp), np.float64)
    lg = np.concatenate([np.asarray(comp.last_logits, np.float64)[None, :], lg], axis=0)
    lse = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
    native_nll = float(np.mean(lse - lg[np.arange(len(cont)), cont]))
    print(f"\ndownstream, {T} context tokens, {len(cont)} continuation tokens ({a.continuation}), transformers float32:")
    print(f"  full cache NLL {full:.4f} nats/token")
    print(f"  kvcompact {man['method']}: delta {kvc - full:+.4f}  (kvcompact's native forward over the same .kvc: "
          f"delta {native_nll - full:+.4f})")
    print(f"  paper's {paper_name}: delta {paper - full:+.4f}")
    print(f"  kvcompact - paper: {kvc - paper:+.2e}")
    return {"context_tokens": T, "continuation_tokens": len(cont), "full_nll": full,
            "kvcompact_delta": kvc - full, "kvcompact_native_delta": native_nll - full, "paper_delta": paper - full}


if __name__ == "__main__":
    main()
