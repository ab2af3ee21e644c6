#!/usr/bin/env python3
"""QuALITY-style QA over compacted caches: kvcompact's methods side by side with NVIDIA's kvpress
(the peer, run as installed) on the same model, the same token ids, the same keep ratios and the
same metrics, in one run.

  bench/peers/compare_kvpress_qa.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --data ../shared/data/quality/quality_example_one_article.jsonl --max-context-tokens 2048 \
      --ratios 0.02,0.05,0.1,0.2,0.5 --out results/qa_vs_kvpress [--threads 2]

1. `kvcompact qa-eval --tokens-json` compacts each article (the context span; the question prompt
   stays verbatim) with kvcompact's versions of the presses and AM, and scores every question:
   the mean NLL of the full-cache model's own greedy answer (nats/token; the paper's evaluated
   tokens) and the multiple-choice pick (the option of highest total log-likelihood). It writes
   the ids it fed (context, prompts, options, reference answers) and its per-question scores.
2. transformers loads the same GGUF (float32); one eager prefill per article captures what
   kvpress's prefill hook hands press.compress at every layer, and each press compresses it with
   its own compress, keeping t = max(1, floor(r*T)) entries per head as kvcompact does
   (bench/peers/compare_kvpress.py: press_cache). The same prompt, answer and option ids are then
   scored at positions T.. with the same formulas.
3. Prints one row per (method, ratio): delta answer NLL (compacted - full) +- SEM over questions
   for each side, their paired difference (flagged `*` when |diff| > max(its SEM, 1e-4)), MC
   accuracy of each side, and the wall time per article (kvcompact: the whole qa-eval run over
   all methods; kvpress: that press's compress calls). Writes OUT/qa_vs_kvpress.{json,md} and the
   figure OUT/qa_vs_kvpress.svg (delta NLL vs keep ratio, kvcompact solid, kvpress dashed).

Outputs already in OUT are reused (kvc_tokens.json, kvc.json) when kvc.json records the same
qa-eval command; other settings are refused. A missing peer or model, a ratio
outside (0, 1), a data file without questions: one-line error, exit 1. Nothing is dropped
silently; a non-finite score stops the run.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_kvpress import (PAIRS, check_snapkv_window, delta_points, load_peer_model, mean_sem,  # noqa: E402
                             prefill_capture, press_cache, split_am_specs, write_comparison_figure)
from compare_kvpress_ruler import write_atomic  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def fail(msg):
    print(f"compare_kvpress_qa: error: {msg}", file=sys.stderr)
    sys.exit(1)


def scored_nll(torch, model, kv, dynamic_cache, first, T, prompt, cont):
    """Per-token NLL [len(cont)] of cont after the cache (kv: [(keys, values)] per layer, entries
    of positions < T) and prompt (ids fed at positions T..); the first prediction of an empty
    prompt comes from first (logits after the context's last token)."""
    ids = list(prompt) + list(cont)
    cache = dynamic_cache(ddp_cache_data=[(k, v) for k, v in kv])
    pos = torch.arange(T, T + len(ids) - 1).unsqueeze(0)
    logits = model(input_ids=torch.tensor([ids[:-1]]), past_key_values=cache, position_ids=pos).logits[0].double()
    logits = torch.cat([first.double().unsqueeze(0), logits], dim=0)
    lp = torch.log_softmax(logits, dim=-1)
    idx = torch.arange(len(prompt), len(ids))
    return (-lp[idx, torch.tensor(ids)[idx]]).tolist()


def question_scores(torch, model, kv, dynamic_cache, first, T, q):
    """(answer NLL nats/token, 1-based MC choice) of one question, as kvcompact's qa-eval scores it."""
    ans = scored_nll(torch, model, kv, dynamic_cache, first, T, q["prompt_ids"], q["answer_ids"])
    lls = [-sum(scored_nll(torch, model, kv, dynamic_cache, first, T, q["prompt_ids"], o)) for o in q["option_ids"]]
    nll = sum(ans) / len(ans)
    if not math.isfinite(nll) or not all(math.isfinite(x) for x in lls):
        fail("a non-finite score")
    return nll, max(range(len(lls)), key=lambda i: (lls[i], -i)) + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--max-context-tokens", type=int, default=2048,
                    help="articles cut to N tokens on both sides (kvpress's eager capture holds every layer's "
                         "attention weights: ~4.5 GB at 2048 for SmolLM2)")
    ap.add_argument("--ratios", default="0.02,0.05,0.1,0.2,0.5")
    ap.add_argument("--presses", default=",".join(p for p, _ in PAIRS))
    ap.add_argument("--kvcompact", default=str(ROOT / "build" / "kvcompact"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chat", action="store_true",
                    help="qa-eval --chat: article + question as one user message in the model's chat template "
                         "(an instruct model answers the plain 'Answer:' prompt with a bare newline)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--am", default="am",
                    help="comma-separated Attention Matching specs run by kvcompact only (default am: repeat-prefill "
                         "queries; am:queries=repeat+onpolicy adds on-policy queries)")
    a = ap.parse_args()

    try:
        ratios = [float(x) for x in a.ratios.split(",") if x.strip()]
    except ValueError:
        fail(f"--ratios: '{a.ratios}' is not a comma-separated list of numbers")
    if not ratios or any(not (0.0 < r < 1.0) for r in ratios):
        fail(f"--ratios: '{a.ratios}' must list keep ratios in (0, 1)")
    known = dict(PAIRS)
    names = [p for p in a.presses.split(",") if p]
    for p in names:
        if p not in known:
            fail(f"--presses: unknown press '{p}' (valid: {', '.join(known)})")
    if not names:
        fail("--presses: empty list")
    am_specs = split_am_specs(a.am)
    if a.threads < 1:
        fail(f"--threads {a.threads}: give 1 or more")
    check_snapkv_window(a.max_context_tokens, names, "--max-context-tokens")
    for f, what in ((a.model, "model"), (a.data, "data file"), (a.kvcompact, "kvcompact (not built)")):
        if not os.path.exists(f):
            fail(f"{f}: no such {what}")
    try:
        import torch
        import kvpress
        from transformers import AutoModelForCausalLM, DynamicCache
    except ImportError as e:
        fail(f"the peer is not installed ({e}); install the pins of scripts/requirements-ref.txt into .venv")
    torch.set_num_threads(a.threads)
    a.out.mkdir(parents=True, exist_ok=True)

    # 1. kvcompact.
    specs = [known[p] for p in names] + am_specs
    tokens_path, kvc_path = a.out / "kvc_tokens.json", a.out / "kvc.json"
    cmd = [a.kvcompact, "qa-eval", "--model", a.model, "--data", a.data, "--max-context-tokens",
           str(a.max_context_tokens), "--methods", ",".join(specs), "--ratios", ",".join(map(str, ratios)),
           "--answers-cache", str(a.out / "answers"), "--threads", str(a.threads), "--tokens-json",
           str(tokens_path), "--json"] + (["--chat"] if a.chat else [])
    ti = cmd.index("--threads")
    settings = cmd[:ti] + cmd[ti + 2:]  # what the outputs depend on (not the thread count)
    if not (tokens_path.exists() and kvc_path.exists()):
        print("+ " + " ".join(cmd), file=sys.stderr)
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr.strip().splitlines()
            fail(f"kvcompact qa-eval failed: {err[-1] if err else proc.returncode}")
        kvc = json.loads(proc.stdout)
        kvc["wall_s"] = time.time() - t0
        kvc["command"] = settings
        write_atomic(kvc_path, json.dumps(kvc, indent=1))
    kvc = json.loads(kvc_path.read_text())
    if kvc.get("command") != settings:  # other data, context cap, methods, ratios or --chat
        fail(f"{kvc_path}: made by another command than `{' '.join(settings)}` (remove it to rerun)")
    tok = json.loads(tokens_path.read_text())
    # qa-eval's rows: "full", then methods x ratios in the order given (method names canonical).
    if len(tok["rows"]) != 1 + len(specs) * len(ratios) or tok["rows"][0]["method"] != "full":
        fail(f"{tokens_path}: its rows are not full + {len(specs)} methods x {len(ratios)} ratios (remove it to rerun)")
    row_index = {}
    for mi, s in enumerate(specs):
        for ri, r in enumerate(ratios):
            i = 1 + mi * len(ratios) + ri
            if abs(float(tok["rows"][i]["ratio"]) - r) > 1e-9 or tok["rows"][i]["method"].split(":")[0].split(",")[0] != s.split(":")[0]:
                fail(f"{tokens_path}: row {i} is {tok['rows'][i]}, expected {s} at {r} (remove it to rerun)")
            row_index[(s, round(r, 6))] = i
    questions = [q for art in tok["articles"] for q in art["questions"]]
    if not questions:
        fail(f"{a.data}: no questions")
    answer_len = sum(len(q["answer_ids"]) for q in questions) / len(questions)

    # 2. kvpress on transformers, on the same ids.
    model, layers = load_peer_model(torch, AutoModelForCausalLM, a.model)
    full, peer, secs = [], {}, {}
    t1 = time.time()
    with torch.no_grad():
        for ai, art in enumerate(tok["articles"]):
            ctx = art["context_ids"]
            T = len(ctx)
            cache, first, captured = prefill_capture(torch, model, layers, ctx, DynamicCache)
            kv_full = [(layer.keys, layer.values) for layer in cache.layers]
            full += [question_scores(torch, model, kv_full, DynamicCache, first, T, q) for q in art["questions"]]
            del cache, kv_full
            for p in names:
                for r in ratios:
                    kv, s = press_cache(kvpress, model, layers, captured, p, r, T)
                    peer.setdefault((p, r), []).extend(
                        question_scores(torch, model, kv, DynamicCache, first, T, q) for q in art["questions"])
                    secs.setdefault((p, r), []).append(s)
                    print(f"compare_kvpress_qa: article {ai + 1}: {p} at {r} scored, {time.time() - t1:.0f} s",
                          file=sys.stderr)
                    for m in layers:
                        m.masked_key_indices = None
            del captured
            print(f"compare_kvpress_qa: article {ai + 1}/{len(tok['articles'])} done, {time.time() - t1:.0f} s",
                  file=sys.stderr)

    # 3. Table.
    n_art = len(tok["articles"])
    full_k = [q["scores"][0]["answer_nll"] for q in questions]
    gap = max(abs(x - y[0]) for x, y in zip(full_k, full))
    gold = [q["gold_label"] for q in questions]
    acc = lambda picks: 100.0 * sum(p == g for p, g in zip(picks, gold)) / len(gold)  # noqa: E731
    head = [f"{n_art} article(s), {len(questions)} questions, context <= {a.max_context_tokens} tokens; full-cache "
            f"answer NLL kvcompact {sum(full_k) / len(full_k):.4f}, transformers "
            f"{sum(x for x, _ in full) / len(full):.4f} nats/token (max gap {gap:.1e}); full-cache MC accuracy "
            f"kvcompact {acc([q['scores'][0]['mc_choice'] for q in questions]):.0f}%, transformers "
            f"{acc([c for _, c in full]):.0f}%; reference answers {answer_len:.1f} tokens on average",
            f"kvcompact qa-eval wall {kvc['wall_s']:.0f} s for all methods ({kvc['wall_s'] / n_art:.1f} s/article)",
            "", "| method | keep ratio | kvcompact spec | kvcompact delta NLL | kvpress delta NLL | diff (paired) | "
            "kvcompact MC % | kvpress MC % | kvpress compress s/article |", "|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for s_label, spec in [(p, known[p]) for p in names] + [("(kvcompact only)", s) for s in am_specs]:
        for r in ratios:
            i = row_index[(spec, round(r, 6))]
            kd = [q["scores"][i]["answer_nll"] - q["scores"][0]["answer_nll"] for q in questions]
            km, ks = mean_sem(kd)
            kacc = acc([q["scores"][i]["mc_choice"] for q in questions])
            row = {"press": s_label if s_label in known else None, "spec": spec, "ratio": r,
                   "kvcompact_delta": kd, "kvcompact_mean": km, "kvcompact_sem": ks, "kvcompact_mc": kacc}
            if s_label in known:
                pd = [x[0] - f[0] for x, f in zip(peer[(s_label, r)], full)]
                pm, ps = mean_sem(pd)
                dm, dsem = mean_sem([x - y for x, y in zip(kd, pd)])
                flag = "*" if abs(dm) > max(dsem, 1e-4) else ""
                pacc = acc([c for _, c in peer[(s_label, r)]])
                ts = sum(secs[(s_label, r)]) / n_art
                row.update({"kvpress_delta": pd, "kvpress_mean": pm, "kvpress_sem": ps, "diff_mean": dm,
                            "diff_sem": dsem, "kvpress_mc": pacc, "kvpress_compress_s": ts})
                head.append(f"| {s_label} | {r:g} | `{spec}` | {km:+.4f} ± {ks:.4f} | {pm:+.4f} ± {ps:.4f} | "
                            f"{dm:+.4f} ± {dsem:.4f}{flag} | {kacc:.0f} | {pacc:.0f} | {ts:.3f} |")
            else:
                head.append(f"| {s_label} | {r:g} | `{spec}` | {km:+.4f} ± {ks:.4f} | - | - | {kacc:.0f} | - | - |")
            rows.append(row)
    text = "\n".join(head)
    print(text)
    write_atomic(a.out / "qa_vs_kvpress.md", text + "\n")
    write_atomic(a.out / "qa_vs_kvpress.json", json.dumps(
        {"model": a.model, "data": a.data, "max_context_tokens": a.max_context_tokens, "questions": len(questions),
         "full_nll_kvcompact": full_k, "full_nll_transformers": [x for x, _ in full], "gold": gold,
         "kvcompact_wall_s": kvc["wall_s"], "kvpress_wall_s": time.time() - t1, "rows": rows}, indent=1))
    write_comparison_figure(a.kvcompact, delta_points(rows),
                            f"QuALITY, {len(questions)} questions: kvcompact solid, kvpress dashed",
                            "delta NLL of the full model's answer (nats/token)", a.out / "qa_vs_kvpress.svg")


if __name__ == "__main__":
    main()
