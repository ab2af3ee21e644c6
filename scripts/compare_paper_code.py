#!/usr/bin/env python3
"""kvcompact's Attention Matching against the paper's own code (adamzweiger/compaction, a local copy
that is never committed), per (layer, KV head), on the same cache and reference queries.

  kvcompact compact --model M --context ctx.txt --ratio 0.1 --method am -o am.kvc --dump-heads DIR_AM
  kvcompact compact --model M --context ctx.txt --ratio 0.1 --method am:select=omp,refit=bounded -o omp.kvc --dump-heads DIR_OMP
  kvcompact compact --model M --context ctx.txt --ratio 0.1 \
    --method am:select=omp,refit=bounded,schedule=progressive,drop=-7,iters=0,lo=-27.631021115928547,hi=7 \
    -o best.kvc --dump-heads DIR_BEST
  scripts/compare_paper_code.py --paper /tmp/paper_compaction --dump DIR_AM --algo am [--heads N]
  scripts/compare_paper_code.py --paper /tmp/paper_compaction --dump DIR_OMP --algo omp [--heads N]
  scripts/compare_paper_code.py --paper /tmp/paper_compaction --dump DIR_BEST --algo omp-best [--heads N]

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
    if downstream:
        for flag, v in (("--kvc", a.kvc), ("--model", a.model), ("--continuation", a.continuation)):
            if not v:
                fail(f"{flag} is needed with --kvc / --model / --continuation (the downstream delta NLL)")
            if not os.path.isfile(v):
                fail(f"{v}: file not found ({flag})")
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
        import numpy as np
        import torch
        algo = paper_algorithm(a.algo)
    except ImportError as e:
        fail(f"cannot import the paper's code or torch: {e}")
    torch.set_num_threads(a.threads)
    man = json.load(open(man_path))
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
    rows = []
    paper_heads = {}  # (layer, kv_head) -> the paper's (C1, beta, C2), for the downstream NLL
    print(f"method {man['method']} (kvcompact) vs paper's {type(algo).__name__}, ratio {man['ratio']}")
    print(f"{'head':<7} {'T':>5} {'n':>6} {'t':>4} {'same keys':>10} {'beta rel':>9} {'C2 rel':>9} {'kvc s':>8} {'paper s':>8}")
    for h in heads:
        base = os.path.join(a.dump, f"L{h['layer']}H{h['kv_head']}_")
        K = torch.from_numpy(np.load(base + "K.npy"))
        V = torch.from_numpy(np.load(base + "V.npy"))
        Q = torch.from_numpy(np.load(base + "Q.npy"))
        sel = np.load(base + "selected.npy").tolist()
        beta = np.load(base + "beta.npy")
        C2 = np.load(base + "C2.npy")
        t = len(sel)
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
        result["downstream"] = downstream_nll(a, man, paper_heads)
    if a.out_json:
        json.dump(result, open(a.out_json, "w"), indent=1)


def downstream_nll(a, man, paper_heads):
    """Continuation NLL (nats/token) over the full cache, kvcompact's .kvc and the paper's C1 / beta /
    C2, all in transformers on the same GGUF and ids; plus kvcompact's native NLL of its .kvc."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare_kvpress import continuation_nll, load_peer_model  # first: it turns tqdm's bars off
    try:
        import kvcompact
        from kvcompact import hf as kvhf
        from transformers import AutoModelForCausalLM, DynamicCache
    except ImportError as e:
        fail(f"the downstream NLL needs kvcompact's Python package and transformers: {e}")

    native = kvcompact.Model(a.model)
    try:
        comp = native.load_cache(a.kvc)
    except kvcompact.Error as e:
        fail(str(e))
    # The .kvc must hold the dump's kept keys (same compact call): compare the selected rows.
    for h in man["heads"]:
        l, g = h["layer"], h["kv_head"]
        base = os.path.join(a.dump, f"L{l}H{g}_")
        c1, _, _ = comp.head(l, g)
        K = np.load(base + "K.npy")
        sel = np.load(base + "selected.npy")
        if c1.shape[0] != len(sel) or not np.allclose(np.asarray(c1), K[sel], rtol=1e-5, atol=1e-5):
            fail(f"{a.kvc}: head L{l}H{g} does not hold the keys of {a.dump} (write both with one `compact` call)")
    ctx = list(comp.context_tokens)
    T = len(ctx)
    if int(comp.next_position) != T:
        fail(f"{a.kvc}: next_position {comp.next_position} differs from its {T} context tokens")
    cont = native.tokenize(open(a.continuation, encoding="utf-8").read(), add_bos=False)[: a.continuation_tokens]
    if len(cont) < 2:
        fail(f"{a.continuation}: fewer than 2 tokens")
    model, _ = load_peer_model(torch, AutoModelForCausalLM, a.model)
    with torch.no_grad():
        full_cache = DynamicCache()
        first = model(input_ids=torch.tensor([ctx]), past_key_values=full_cache, logits_to_keep=1).logits[0, -1]
        full = continuation_nll(torch, model, full_cache, first, cont, T)
        kvc = continuation_nll(torch, model, kvhf.from_kvcompact(comp, model), first, cont, T)
        heads = []
        for l in range(comp.n_layers):
            lh = []
            for g in range(comp.n_kv_heads):
                c1, beta, c2 = paper_heads[(l, g)]
                if comp.rope_style == "interleaved":  # kvcompact's GGUF layout -> transformers' half split
                    c1 = np.concatenate([c1[:, 0::2], c1[:, 1::2]], axis=1)
                lh.append((np.ascontiguousarray(c1), beta, c2))
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
    print(f"  paper's {type(paper_algorithm(a.algo)).__name__}: delta {paper - full:+.4f}")
    print(f"  kvcompact - paper: {kvc - paper:+.2e}")
    return {"context_tokens": T, "continuation_tokens": len(cont), "full_nll": full,
            "kvcompact_delta": kvc - full, "kvcompact_native_delta": native_nll - full, "paper_delta": paper - full}


if __name__ == "__main__":
    main()
