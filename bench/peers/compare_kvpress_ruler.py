#!/usr/bin/env python3
"""RULER accuracy of kvcompact's compaction methods side by side with kvpress's presses, on the
same model, the same task items and the same keep ratios, in one run.

  bench/peers/compare_kvpress_ruler.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --kvpress-repo /tmp/kvpress_repo --tasks ruler_niah_single_1_1024.jsonl,... --n 10 \
      --ratios 0.1,0.5 --out results/ruler_vs_kvpress [--threads 2] [--am am,am:queries=repeat+onpolicy]

For every task file (made by `kvcompact tasks --family ruler_<task> --context-tokens L`):
1. kvcompact's side: `kvcompact task-eval --out-json OUT/kvc_<name>.json` on N evenly spaced
   items (written to OUT/items_<name>.jsonl, the one file both sides read) with the methods of
   PAIRS (kvcompact's own versions of the presses) plus the Attention Matching specs of --am
   (default "am", repeat-prefill reference queries; "am:queries=repeat+onpolicy" adds on-policy
   queries); the context span is compacted, the question fed verbatim, the greedy
   answer scored by RULER's recall (string_match_all).
2. kvpress's side: bench/peers/kvpress_eval.py (kvpress's own EvaluationRunner, pipeline and RULER
   scorer from the kvpress repository) on the same item file, fed as task-eval feeds it
   (kvpress_eval.py --plain-prompt: the same context and question ids, checked identical on
   SmolLM2, instead of kvpress's default of wrapping them in the model's chat template), each
   press at compression_ratio
   1 - r (given as 1 - r - 1e-12, kvpress_eval.py --align-keep, so that both sides keep
   floor(r * T) entries); per-item scores are recomputed from its predictions.csv with the
   scorer's formula (for the SEM) and checked against its metrics.json mean.
3. Prints one markdown row per (task, method, ratio): kvcompact's score +- SEM, kvpress's score +-
   SEM, the difference (flagged `*` when it exceeds the larger SEM), and the time per context of
   each side (kvcompact: compaction; kvpress: its whole inference call, prefill + press +
   generation, over N). Writes OUT/ruler_vs_kvpress.{json,md} and, per task file, the figure
   OUT/<name>.svg (`kvcompact plot`: kvcompact solid, kvpress dashed).

Outputs already in OUT are reused (a rerun finishes only what is missing). A peer that is not
installed, a ratio outside (0, 1], a task file that is missing or empty: one-line error, exit 1.
A method or item that fails stops the run; nothing is dropped silently.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_kvpress import mean_sem, split_am_specs, write_comparison_figure  # noqa: E402  (shared with the delta-NLL comparison)

# (kvpress PRESS_REGISTRY name, kvcompact method spec, label). kvpress's registry entry
# "expected_attention" is AdaKV(ExpectedAttention(epsilon=1e-2)); kvcompact's pair is adakv over
# expected attention scores with the same epsilon.
PAIRS = [
    ("snapkv", "snapkv:window=64", "SnapKV"),
    ("streaming_llm", "streaming", "StreamingLLM"),
    ("knorm", "knorm", "Knorm"),
    ("tova", "tova", "TOVA"),
    ("expected_attention", "adakv:scorer=expected,eps=0.01", "AdaKV(ExpectedAttention)"),
    ("observed_attention", "observed", "ObservedAttention"),
    ("adakv_snapkv", "adakv", "AdaKV(SnapKV)"),
]
# Attention Matching variants run by kvcompact only (--am picks them): the query source is the
# setting that matters most (repeat-prefill queries; on-policy adds layer l's queries recomputed
# with layers < l already compacted).
AM_LABELS = {"am": "AM (repeat queries)", "am:queries=repeat+onpolicy": "AM (repeat + on-policy queries)"}
ROOT = Path(__file__).resolve().parents[2]


def write_atomic(path, text):
    """Writes text to path through a temporary file beside it, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def fail(msg):
    print(f"compare_kvpress_ruler: error: {msg}", file=sys.stderr)
    sys.exit(1)


def ruler_recall(pred, refs):
    """kvpress's RULER string_match_all for one item: share of references found in the lowercased
    prediction (evaluation/benchmarks/ruler/calculate_metrics.py)."""
    return sum(1.0 if r.lower() in pred.lower() else 0.0 for r in refs) / len(refs)


def parse_refs(cell):
    try:
        v = json.loads(cell)
    except json.JSONDecodeError:
        import ast

        v = ast.literal_eval(cell)
    return [v] if isinstance(v, str) else list(v)


def run(cmd, log, env=None):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if r.returncode != 0:
        fail(f"{cmd[0]} failed (exit {r.returncode}); see {log}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--kvpress-repo", required=True, type=Path)
    ap.add_argument("--tasks", required=True, help="comma-separated RULER task files (JSONL)")
    ap.add_argument("--n", type=int, default=10, help="first N items of each file")
    ap.add_argument("--ratios", default="0.1,0.5", help="keep ratios r (kvpress: compression 1 - r)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kvcompact", type=Path, default=ROOT / "build" / "kvcompact")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--am", default="am",
                    help="comma-separated Attention Matching specs run by kvcompact only (e.g. am,am:queries=repeat+onpolicy)")
    args = ap.parse_args()
    kvcompact_only = [(m, AM_LABELS.get(m, f"AM ({m})")) for m in split_am_specs(args.am)]

    try:
        ratios = [float(r) for r in args.ratios.split(",") if r]
    except ValueError:
        fail(f"--ratios {args.ratios!r}: not a comma-separated list of numbers")
    if not ratios or any(not (0 < r <= 1) for r in ratios):
        fail(f"--ratios {args.ratios!r}: each keep ratio must be in (0, 1]")
    if args.n < 1:
        fail("--n must be >= 1")
    if args.threads < 1:
        fail(f"--threads {args.threads}: give 1 or more")
    if not args.model.is_file():
        fail(f"{args.model}: model file not found (scripts/setup.sh fetches the models)")
    if not args.kvcompact.exists():
        fail(f"{args.kvcompact}: kvcompact binary not found (build it first)")
    if not (args.kvpress_repo / "evaluation" / "evaluate.py").exists():
        fail(f"{args.kvpress_repo}: not a kvpress checkout (no evaluation/evaluate.py)")
    try:
        subprocess.run([args.python, "-c", "import kvpress"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        fail(f"kvpress is not installed for {args.python} (run scripts/setup.sh)")
    files = [Path(t) for t in args.tasks.split(",") if t]
    if not files:
        fail("--tasks: no task files")
    for f in files:
        if not f.is_file():
            fail(f"{f}: task file not found")
        if not any(line.strip() for line in f.open()):
            fail(f"{f}: empty task file")
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))

    rows = []
    for f in files:
        name = f.stem[len("ruler_"):] if f.stem.startswith("ruler_") else f.stem
        lines = [line for line in f.open() if line.strip()]
        total = len(lines)
        n = min(args.n, total)
        # Both sides read the same n items from one file. kvpress's --fraction would draw a random
        # sample (df.sample(random_state=seed)), not the items task-eval --n takes; and `kvcompact
        # tasks` spreads the needle depth evenly over a file's items in order, so the first n would
        # all have shallow needles. Take n evenly spaced items instead.
        picks = sorted({round(i * (total - 1) / max(n - 1, 1)) for i in range(n)})
        subset = args.out / f"items_{name}.jsonl"
        subset_text = "".join(lines[i] if lines[i].endswith("\n") else lines[i] + "\n" for i in picks)
        if not subset.exists() or subset.read_text() != subset_text:
            write_atomic(subset, subset_text)
        item_ids = [json.loads(lines[i]).get("id") for i in picks]
        kvc_json = args.out / f"kvc_{name}.json"
        if not kvc_json.exists():
            methods = ",".join([m for m, _ in kvcompact_only] + [spec for _, spec, _ in PAIRS])
            run([str(args.kvcompact), "task-eval", "--model", str(args.model), "--tasks", str(subset), "--n", str(n),
                 "--threads", str(args.threads), "--methods", methods, "--ratios", ",".join(map(str, ratios)),
                 "--out-json", str(kvc_json)], args.out / f"kvc_{name}.log")
        kvc = json.loads(kvc_json.read_text())
        have = {r["method"] for r in kvc["rows"]}
        lacking = [m for m, _ in kvcompact_only if m not in have]
        if lacking:
            fail(f"{kvc_json}: no rows for {','.join(lacking)} (remove it to rerun with these --am specs)")
        if kvc["items"] != n or [u.get("id") for u in kvc["per_item"]] != item_ids:
            fail(f"{kvc_json}: its items are not the {n} of {subset} (remove it to rerun)")
        kvc_rows = {(r["method"], round(r["ratio"], 6)): r for r in kvc["rows"]}
        kvp_dir = args.out / f"kvp_{name}"
        conds = [(press, spec, label, r) for press, spec, label in [("no_press", "full", "full")] + PAIRS
                 for r in ([1.0] if press == "no_press" else ratios)]
        missing = [c for c in conds if not (kvp_dir / f"{c[0]}_{round(1.0 - c[3], 6)}" / "seconds.json").exists()]
        # One kvpress_eval call (one model load) for the missing conditions, and a second one for
        # ObservedAttention, which needs eager attention (AdaKV refuses eager).
        presses = list(dict.fromkeys(c[0] for c in missing))
        for group in ([p for p in presses if "observed" not in p], [p for p in presses if "observed" in p]):
            if not group:
                continue
            crs = sorted({round(1.0 - c[3], 6) for c in missing if c[0] in group and c[0] != "no_press"})
            run([args.python, str(ROOT / "bench" / "peers" / "kvpress_eval.py"), "--kvpress-repo", str(args.kvpress_repo),
                 "--data", str(subset), "--model", str(args.model), "--fraction", "1", "--threads",
                 str(args.threads), "--align-keep", "--plain-prompt", "--presses", ",".join(group), "--ratios",
                 ",".join(map(str, crs or [round(1.0 - ratios[0], 6)])), "--output-dir", str(kvp_dir)],
                args.out / f"kvp_{name}_{group[0]}.log", env)
        for press, spec, label, r in conds:
            cr = round(1.0 - r, 6)
            pdir = kvp_dir / f"{press}_{cr}"
            preds = list(csv.DictReader((pdir / "predictions.csv").open()))
            if len(preds) != n:
                fail(f"{pdir}/predictions.csv: {len(preds)} items, expected {n}")
            if "id" in preds[0] and sorted(p["id"] for p in preds) != sorted(str(i) for i in item_ids):
                fail(f"{pdir}/predictions.csv: its items are not those of {subset} (remove {kvp_dir} to rerun)")
            scores = [100 * ruler_recall(p["predicted_answer"], parse_refs(p["answer"])) for p in preds]
            pm, ps = mean_sem(scores)
            metric = json.loads((pdir / "metrics.json").read_text())
            mm = next(iter(metric.values()))
            mm = mm.get("string_match", mm) if isinstance(mm, dict) else mm
            if abs(float(mm) - pm) > 1e-6:
                fail(f"{pdir}: recomputed mean {pm} differs from kvpress's metrics.json {mm}")
            k = kvc_rows.get((spec, round(r, 6)))
            if k is None:
                fail(f"{kvc_json}: no row for {spec} at {r}")
            secs = json.loads((pdir / "seconds.json").read_text())["inference_s"]
            rows.append({"task": name, "method": label, "ratio": r, "n": n,
                         "kvcompact": k["score"], "kvcompact_sem": k["score_sem"],
                         "kvpress": pm, "kvpress_sem": ps,
                         "kvcompact_compaction_s": k["compaction_s"],
                         "kvpress_s_per_context": secs / n})
        for m, label in kvcompact_only:
            for r in ratios:
                k = kvc_rows[(m, round(r, 6))]
                rows.append({"task": name, "method": label, "ratio": r, "n": n, "kvcompact": k["score"],
                             "kvcompact_sem": k["score_sem"], "kvpress": None, "kvpress_sem": None,
                             "kvcompact_compaction_s": k["compaction_s"], "kvpress_s_per_context": None})

    lines = ["| task | method | keep ratio | n | kvcompact | kvpress | diff | kvcompact compaction s/context | kvpress s/context (all) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kvpress"] is None:
            kp = diff = "-"
        else:
            d = r["kvcompact"] - r["kvpress"]
            flag = "*" if abs(d) > max(r["kvcompact_sem"], r["kvpress_sem"]) else ""
            kp = f"{r['kvpress']:.0f} ± {r['kvpress_sem']:.1f}"
            diff = f"{d:+.0f}{flag}"
        t = "-" if r["kvpress_s_per_context"] is None else f"{r['kvpress_s_per_context']:.2f}"
        lines.append(f"| {r['task']} | {r['method']} | {r['ratio']:g} | {r['n']} | {r['kvcompact']:.0f} ± "
                     f"{r['kvcompact_sem']:.1f} | {kp} | {diff} | {r['kvcompact_compaction_s']:.3f} | {t} |")
    table = "\n".join(lines)
    print(table)
    write_atomic(args.out / "ruler_vs_kvpress.json", json.dumps({"model": str(args.model), "rows": rows}, indent=1))
    (args.out / "ruler_vs_kvpress.md").write_text(table + "\n")

    for name in dict.fromkeys(r["task"] for r in rows):
        pts = []
        for r in rows:
            if r["task"] != name or r["method"] == "full":
                continue
            pts.append({"method": r["method"], "peer": False, "ratio": r["ratio"], "mean": r["kvcompact"],
                        "sem": r["kvcompact_sem"]})
            if r["kvpress"] is not None:
                pts.append({"method": r["method"], "peer": True, "ratio": r["ratio"], "mean": r["kvpress"],
                            "sem": r["kvpress_sem"]})
        write_comparison_figure(args.kvcompact, pts, f"RULER {name}: kvcompact (solid) vs kvpress (dashed)",
                                "RULER score (x100)", args.out / f"{name}.svg")


if __name__ == "__main__":
    main()
