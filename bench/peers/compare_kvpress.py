#!/usr/bin/env python3
"""kvcompact's compaction methods side by side with NVIDIA's kvpress (the peer, run as installed)
on the same model, the same token ids, the same keep ratios and the same metric.

  bench/peers/compare_kvpress.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --data ../shared/data/wikitext2/wiki.test.raw --docs 5 --context-tokens 1024 \
      --continuation-tokens 256 --ratios 0.02,0.05,0.1,0.2,0.5 [--out-json F.json]

1. `kvcompact compact-eval --split wikitext --json` runs kvcompact's methods (AM and its own
   versions of the presses) and reports, per document, the token ids, the full-cache NLL and each
   (method, ratio)'s delta NLL and compaction wall time.
2. transformers loads the same GGUF (float32); for every document each kvpress press compresses
   the context's cache with its own compress (on what its prefill hook would be handed), keeping exactly the same number
   t = max(1, floor(r*T)) of entries per head as kvcompact (compression_ratio = 1 - (t + 0.5)/T);
   the continuation is then scored teacher-forced at its original positions T..N-1 (as kvpress's
   pipeline places the question). delta = NLL(compressed) - NLL(full), nats/token.
3. Prints one row per (method, ratio): kvcompact's delta +- SEM, kvpress's delta +- SEM, the
   paired difference +- its SEM over documents (flagged `*` when |diff| > SEM), and the wall time
   per context of each side (kvcompact: compaction of the whole cache, plus the reference-query
   prefill for AM; kvpress: its compress calls over all layers). --figure F.svg also draws delta
   NLL vs keep ratio (`kvcompact plot`, kvcompact solid, kvpress dashed).

A missing peer, a ratio outside [0, 1] or an empty document set: one-line error, exit status 1.
A method or document that fails stops the run (nothing is dropped silently).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

# No progress bar from the GGUF loader of transformers (its own tqdm, which reads TQDM_* when
# tqdm is imported, so this must come before transformers is).
os.environ.setdefault("TQDM_DISABLE", "1")

# kvpress press -> kvcompact's version of it (a method spec of `kvcompact methods`).
PAIRS = [
    ("SnapKV", "snapkv:window=64"),
    ("StreamingLLM", "streaming"),
    ("Knorm", "knorm"),
    ("TOVA", "tova"),
    ("ExpectedAttention", "expected"),
    ("ObservedAttention", "observed"),
    ("AdaKV(SnapKV)", "adakv"),
]
KVCOMPACT_ONLY = ["am", "snapkv"]  # Attention Matching (repeat-prefill queries), SnapKV as its authors


def fail(msg):
    """One-line error under the name of the script that runs (this module's helpers serve several)."""
    prog = os.path.splitext(os.path.basename(sys.argv[0] or "compare_kvpress"))[0]
    print(f"{prog}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def split_am_specs(text, flag="--am"):
    """The Attention Matching specs of a comma-separated list, split as kvcompact's
    parse_method_list does for them: a spec starts at "am" or "am:...", and other items are more
    options of the spec before ("am:select=omp,refit=bounded,am" is two specs). Each spec is checked
    with kvcompact.canonical_method when build/python is importable. Exits with an error for an
    empty list, an item that is not an AM spec, or a spec kvcompact refuses."""
    specs = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item == "am" or item.startswith("am:"):
            specs.append(item)
        elif specs and "=" in item:
            specs[-1] += "," + item
        else:
            fail(f"{flag} {text!r}: '{item}' is not an Attention Matching spec (am[:options])")
    if not specs:
        fail(f"{flag} {text!r}: give one or more Attention Matching specs (am[:options])")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    try:
        import kvcompact
    except ImportError:
        return specs  # not built here: kvcompact's own run checks them
    for spec in specs:
        try:
            kvcompact.canonical_method(spec)
        except Exception as e:  # kvcompact.Error: a bad option
            fail(f"{flag}: {spec}: {e}")
    return specs


def mean_sem(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, 0.0
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def write_comparison_figure(kvcompact, points, title, y_title, out_svg, peer="kvpress"):
    """Writes out_svg (and the JSON beside it, out_svg with .json) with `kvcompact plot`: one line per
    (method, side) over keep ratio, kvcompact solid and the peer dashed (JSON kind "comparison";
    points: dicts with method, peer (bool), ratio, mean, sem). Exits with an error if the plot fails."""
    bad = [p for p in points if not (math.isfinite(p["mean"]) and math.isfinite(p["sem"]))]
    if bad:
        fail(f"{out_svg}: non-finite point {bad[0]} (a failed condition); not drawn")
    fig = {"kind": "comparison", "title": title, "y_title": y_title, "peer": peer, "points": points}
    out_svg = os.fspath(out_svg)
    fj = os.path.splitext(out_svg)[0] + ".json"
    try:
        with open(fj + ".tmp", "w") as f:
            json.dump(fig, f, indent=1)
        os.replace(fj + ".tmp", fj)
        proc = subprocess.run([os.fspath(kvcompact), "plot", fj, "-o", out_svg], capture_output=True, text=True)
    except OSError as e:
        fail(f"{out_svg}: cannot write the figure: {e}")
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        fail(f"kvcompact plot {fj} failed: {err[-1] if err else proc.returncode}")


def delta_points(rows):
    """Figure points of delta-NLL rows (press or None, spec, ratio, kvcompact_mean / _sem and, with a
    press, kvpress_mean / _sem): a press row gives a kvcompact and a kvpress point under the press's
    name, a kvcompact-only row one point under its spec."""
    pts = []
    for r in rows:
        name = r["press"] or r["spec"]
        pts.append({"method": name, "peer": False, "ratio": r["ratio"], "mean": r["kvcompact_mean"],
                    "sem": r["kvcompact_sem"]})
        if r["press"]:
            pts.append({"method": name, "peer": True, "ratio": r["ratio"], "mean": r["kvpress_mean"],
                        "sem": r["kvpress_sem"]})
    return pts


def check_writable(path, flag):
    """Exits with an error unless path's folder exists and is writable (checked before a long run)."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        fail(f"{flag} {path}: folder {folder} does not exist or is not writable")


def check_snapkv_window(n_tokens, names, flag):
    """Exits with an error when a context of n_tokens is too short for kvpress's SnapKV (and AdaKV
    over it): its compress asserts the context is longer than its 64-token window."""
    window = 64
    if n_tokens <= window and any(p in ("SnapKV", "AdaKV(SnapKV)") for p in names):
        fail(f"{flag} {n_tokens}: SnapKV and AdaKV(SnapKV) need more than their {window}-token window "
             f"(kvpress asserts it); give more, or drop them from --presses")


def make_press(name, cr, kvpress):
    if name == "SnapKV":
        return kvpress.SnapKVPress(compression_ratio=cr)
    if name == "StreamingLLM":
        return kvpress.StreamingLLMPress(compression_ratio=cr)
    if name == "Knorm":
        return kvpress.KnormPress(compression_ratio=cr)
    if name == "TOVA":
        return kvpress.TOVAPress(compression_ratio=cr)
    if name == "ExpectedAttention":
        return kvpress.ExpectedAttentionPress(compression_ratio=cr)
    if name == "ObservedAttention":
        return kvpress.ObservedAttentionPress(compression_ratio=cr)
    if name == "AdaKV(SnapKV)":
        return kvpress.AdaKVPress(kvpress.SnapKVPress(compression_ratio=cr))
    fail(f"unknown press {name}")


def kept_entries(r, T):
    return 0 if r == 0 else max(1, math.floor(r * T))


def load_peer_model(torch, auto_model, model_path):
    """transformers' float32 model of a GGUF file (eager attention) and its attention modules, each
    given the model's rotary embedding as kvpress's BasePress.__call__ does."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no per-tensor bars in logs
    path = os.path.abspath(model_path)
    model = auto_model.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                       dtype=torch.float32, attn_implementation="eager")
    model.eval()
    layers = [layer.self_attn for layer in model.model.layers]
    for m in layers:
        m.rotary_emb = model.model.rotary_emb
    return model, layers


def prefill_capture(torch, model, layers, ctx, dynamic_cache):
    """One eager prefill of ctx (ids) that captures, at every layer, what kvpress's forward hook
    hands press.compress (the attention input, the layer's keys and values, the eager attention
    weights, the forward kwargs). Returns (full cache, logits after the last context token,
    captured); the model is left on sdpa attention."""
    captured = [None] * len(layers)

    def capture(module, args, kwargs, output):
        cache = kwargs["past_key_values"]
        k, v = cache.layers[module.layer_idx].keys, cache.layers[module.layer_idx].values
        captured[module.layer_idx] = (kwargs["hidden_states"], k.clone(), v.clone(), output[1], kwargs)
        return output

    hooks = [m.register_forward_hook(capture, with_kwargs=True) for m in layers]
    model.set_attn_implementation("eager")
    cache = dynamic_cache()
    first = model(input_ids=torch.tensor([ctx]), past_key_values=cache, logits_to_keep=1).logits[0, -1]
    for h in hooks:
        h.remove()
    model.set_attn_implementation("sdpa")
    return cache, first, captured


def press_cache(kvpress, model, layers, captured, p, r, T):
    """kvpress's own compress of every layer's captured cache (as its prefill hook would call it),
    keeping t = max(1, floor(r*T)) entries per head. Returns ([(keys, values)] per layer, seconds).
    For AdaKV the modules' masked_key_indices stay set (kvpress's attention patch reads them):
    reset them to None after scoring. Exits with an error when the kept counts are not t."""
    t = kept_entries(r, T)
    press = make_press(p, 1.0 - (t + 0.5) / T, kvpress)
    press.post_init_from_model(model)
    kv = []
    ts = time.time()
    for m, (hs, k, v, attn, kw) in zip(layers, captured):
        m.masked_key_indices = None
        kv.append(press.compress(m, hs, k, v, attn if p == "ObservedAttention" else None, kw))
    secs = time.time() - ts
    n_entries = sum(k.shape[2] for k, _ in kv)
    want = (T if p == "AdaKV(SnapKV)" else t) * len(layers)
    if n_entries != want:
        fail(f"{p} at ratio {r} kept {n_entries} entries, expected {want}")
    if p == "AdaKV(SnapKV)":
        masked = sum(len(m.masked_key_indices[2]) for m in layers)
        if masked != (T - t) * model.config.num_key_value_heads * len(layers):
            fail(f"AdaKV at ratio {r} masked {masked} entries")
    return kv, secs


def continuation_nll(torch, model, cache, first_logits, cont, T):
    """Mean NLL of cont (list of ids) given a cache of the context; first token from first_logits."""
    ids = torch.tensor([cont[:-1]], dtype=torch.long)
    pos = torch.arange(T, T + len(cont) - 1).unsqueeze(0)
    logits = model(input_ids=ids, past_key_values=cache, position_ids=pos).logits[0].double()
    logits = torch.cat([first_logits.double().unsqueeze(0), logits], dim=0)
    lp = torch.log_softmax(logits, dim=-1)
    tgt = torch.tensor(cont)
    return float(-lp[torch.arange(len(cont)), tgt].mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--docs", type=int, default=5)
    ap.add_argument("--context-tokens", type=int, default=1024)
    ap.add_argument("--continuation-tokens", type=int, default=256)
    ap.add_argument("--ratios", default="0.02,0.05,0.1,0.2,0.5")
    ap.add_argument("--presses", default=",".join(p for p, _ in PAIRS), help="kvpress presses to run")
    ap.add_argument("--kvcompact-only", default=",".join(KVCOMPACT_ONLY), help="extra kvcompact specs")
    ap.add_argument("--kvcompact", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "kvcompact"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out-json", default="")
    ap.add_argument("--figure", default="", help="also draw delta NLL vs keep ratio (kvcompact solid, kvpress dashed) to this .svg")
    ap.add_argument("--kvcompact-json", default="",
                    help="reuse a `compact-eval --out-json` file made with the same settings instead of running it")
    a = ap.parse_args()

    try:
        ratios = [float(x) for x in a.ratios.split(",") if x.strip()]
    except ValueError:
        fail(f"--ratios: '{a.ratios}' is not a comma-separated list of numbers")
    if not ratios:
        fail("--ratios: empty list")
    for r in ratios:
        if not (0.0 < r < 1.0):
            fail(f"--ratios: {r} is outside (0, 1) (kvpress needs a compression ratio in [0, 1))")
    if a.docs < 1:
        fail(f"--docs {a.docs}: no documents to evaluate")
    if a.threads < 1:
        fail(f"--threads {a.threads}: give 1 or more")
    for flag, path in (("--out-json", a.out_json), ("--figure", a.figure)):
        if path:
            check_writable(path, flag)
    names = [p for p in a.presses.split(",") if p]
    known = dict(PAIRS)
    for p in names:
        if p not in known:
            fail(f"--presses: unknown press '{p}' (valid: {', '.join(known)})")
    if not names:
        fail("--presses: empty list")
    check_snapkv_window(a.context_tokens, names, "--context-tokens")
    try:
        import torch
        import kvpress
        from transformers import AutoModelForCausalLM, DynamicCache
    except ImportError as e:
        fail(f"the peer is not installed ({e}); install the pins of scripts/requirements-ref.txt into .venv")
    if not os.path.exists(a.kvcompact):
        fail(f"{a.kvcompact}: kvcompact is not built")
    torch.set_num_threads(a.threads)

    # 1. kvcompact.
    specs = [known[p] for p in names] + [s for s in a.kvcompact_only.split(",") if s]
    cmd = [a.kvcompact, "compact-eval", "--model", a.model, "--data", a.data, "--split", "wikitext",
           "--docs", str(a.docs), "--context-tokens", str(a.context_tokens), "--continuation-tokens",
           str(a.continuation_tokens), "--ratios", ",".join(map(str, ratios)), "--methods", ",".join(specs),
           "--threads", str(a.threads), "--json"]
    t0 = time.time()
    if a.kvcompact_json:
        try:
            kvc = json.load(open(a.kvcompact_json))
        except (OSError, ValueError) as e:
            fail(f"{a.kvcompact_json}: {e}")
        kvc_wall = float("nan")
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            fail(f"kvcompact compact-eval failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
        kvc = json.loads(proc.stdout)
        kvc_wall = time.time() - t0
    if kvc.get("mean_context_tokens") != a.context_tokens or kvc.get("mean_continuation_tokens") != a.continuation_tokens:
        fail("the kvcompact result was made with other --context-tokens / --continuation-tokens")
    docs = kvc["per_document"]
    if len(docs) != a.docs:
        fail(f"kvcompact evaluated {len(docs)} documents, {a.docs} were asked for")
    rows = {(r["method"], float(r["ratio"])): r for r in kvc["rows"]}
    for s in specs:
        for r in ratios:
            canon = s if (s, r) in rows else None
            if canon is None:
                fail(f"kvcompact's result has no row for {s} at ratio {r}")

    # 2. kvpress on transformers. One eager prefill per document captures, at every layer, what
    # kvpress's forward hook hands press.compress (the attention input, the layer's keys and values,
    # the eager attention weights, the forward kwargs); each (press, ratio) then calls kvpress's own
    # compress on those, exactly as its hook would during a prefill (compression there happens after
    # the layer's attention, so later layers and the last logits never see it).
    model, layers = load_peer_model(torch, AutoModelForCausalLM, a.model)
    peer = {}  # (press, ratio) -> {"delta": [...], "seconds": [...]}
    hf_full, full_secs = [], []
    t1 = time.time()
    with torch.no_grad():
        for di, doc in enumerate(docs):
            ids, T = doc["tokens"], doc["context_tokens"]
            ctx, cont = ids[:T], ids[T:]
            ts = time.time()
            cache, first, captured = prefill_capture(torch, model, layers, ctx, DynamicCache)
            full_secs.append(time.time() - ts)
            full = continuation_nll(torch, model, cache, first, cont, T)
            hf_full.append(full)
            del cache
            for p in names:
                for r in ratios:
                    kv, secs = press_cache(kvpress, model, layers, captured, p, r, T)
                    cache = DynamicCache(ddp_cache_data=kv)
                    nll = continuation_nll(torch, model, cache, first, cont, T)
                    for m in layers:
                        m.masked_key_indices = None
                    if not math.isfinite(nll):
                        fail(f"document {di + 1}: {p} at ratio {r} gave a non-finite NLL")
                    d = peer.setdefault((p, r), {"delta": [], "seconds": []})
                    d["delta"].append(nll - full)
                    d["seconds"].append(secs)
            print(f"compare_kvpress: document {di + 1}/{len(docs)} done, {time.time() - t1:.0f} s", file=sys.stderr)
    peer_wall = time.time() - t1

    # 3. Table.
    full_gap = max(abs(h - d["full_nll"]) for h, d in zip(hf_full, docs))
    ref_s = kvc["reference_seconds"] / len(docs)
    load = os.getloadavg()
    print(f"{len(docs)} documents x {a.context_tokens} context + {a.continuation_tokens} continuation tokens; "
          f"full-cache NLL kvcompact {sum(d['full_nll'] for d in docs) / len(docs):.4f}, transformers "
          f"{sum(hf_full) / len(hf_full):.4f} (max gap {full_gap:.2e}) nats/token")
    print(f"wall: kvcompact {kvc_wall:.0f} s, kvpress {peer_wall:.0f} s; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("delta = NLL(compacted) - NLL(full), nats/token, mean +- SEM over documents; diff = kvcompact - kvpress "
          "(paired), * when |diff| > max(its SEM, 1e-4)\n")
    hdr = f"{'method':<18} {'ratio':>5}  {'kvcompact spec':<18} {'kvcompact delta':>17}  {'kvpress delta':>17}  {'diff':>17}   {'kvc s/ctx':>9} {'kvp s/ctx':>9}"
    print(hdr)
    print("-" * len(hdr))
    out_rows = []
    for p in names:
        s = known[p]
        for r in ratios:
            kr = rows[(s, r)]
            kd, kp = kr["delta_nll_per_document"], peer[(p, r)]["delta"]
            km, ks = mean_sem(kd)
            pm, ps = mean_sem(kp)
            dm, ds = mean_sem([x - y for x, y in zip(kd, kp)])
            flag = "*" if abs(dm) > max(ds, 1e-4) else " "
            kvc_s = kr["compaction_seconds"]
            pe_s = sum(peer[(p, r)]["seconds"]) / len(kp)
            print(f"{p:<18} {r:>5}  {s:<18} {km:>+8.4f} +- {ks:.4f}  {pm:>+8.4f} +- {ps:.4f}  {dm:>+8.4f} +- {ds:.4f} {flag} {kvc_s:>9.3f} {pe_s:>9.3f}")
            out_rows.append({"press": p, "spec": s, "ratio": r, "kvcompact_delta": kd, "kvpress_delta": kp,
                             "kvcompact_mean": km, "kvcompact_sem": ks, "kvpress_mean": pm, "kvpress_sem": ps,
                             "diff_mean": dm, "diff_sem": ds, "kvcompact_seconds": kvc_s, "kvpress_seconds": pe_s})
    for s in [x for x in a.kvcompact_only.split(",") if x]:
        for r in ratios:
            kr = rows[(s, r)]
            km, ks = mean_sem(kr["delta_nll_per_document"])
            extra = kr["compaction_seconds"] + (ref_s if s.startswith("am") else 0.0)
            print(f"{'(kvcompact only)':<18} {r:>5}  {s:<18} {km:>+8.4f} +- {ks:.4f}  {'':>17}  {'':>17}   {extra:>9.3f}")
            out_rows.append({"press": None, "spec": s, "ratio": r, "kvcompact_delta": kr["delta_nll_per_document"],
                             "kvcompact_mean": km, "kvcompact_sem": ks, "kvcompact_seconds": extra})
    if a.out_json:
        with open(a.out_json, "w") as f:
            json.dump({"documents": len(docs), "context_tokens": a.context_tokens,
                       "continuation_tokens": a.continuation_tokens, "full_nll_kvcompact": [d["full_nll"] for d in docs],
                       "full_nll_transformers": hf_full, "reference_seconds_per_doc": ref_s,
                       "load_average": load, "kvcompact_wall_s": kvc_wall, "kvpress_wall_s": peer_wall,
                       "rows": out_rows}, f, indent=1)
    if a.figure:
        write_comparison_figure(a.kvcompact, delta_points(out_rows),
                                f"WikiText-2, {len(docs)} articles: kvcompact solid, kvpress dashed",
                                "delta NLL (nats/token)", a.figure)


if __name__ == "__main__":
    main()
