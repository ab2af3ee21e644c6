#!/usr/bin/env python3
"""Runs kvpress's own evaluation code (NVIDIA/kvpress, evaluation/evaluate.py: EvaluationRunner's
inference over the "kv-press-text-generation" pipeline, its predictions CSV and its scorer, e.g.
the RULER string-match scorer evaluation/benchmarks/ruler/calculate_metrics.py) on a LOCAL dataset
file instead of the Hugging Face hub, for a list of presses (kvcompact's and kvpress's) at given
compression ratios, and prints a table.

The kvpress repository is not in the pip package: check it out (e.g. `git clone` or the search
tool's fetch + `git archive HEAD evaluation | tar -x -C /tmp/kvpress_repo`) and point
--kvpress-repo at the folder holding evaluation/.

usage:
  PYTHONPATH=build/python .venv/bin/python bench/peers/kvpress_eval.py --kvpress-repo /tmp/kvpress_repo \
      --data tasks.jsonl --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --presses no_press,snapkv,kvcompact_am,kvcompact_snapkv --ratios 0.5,0.9 [--fraction 1] \
      [--max-new-tokens N] [--output-dir /tmp/kvpress_eval] [--threads 2]

--data: JSONL (one object a line) or a parquet / CSV file in kvpress's dataframe format:
  context, question, answer_prefix (default ""), answer or answers (list of acceptable strings, or
  one string), max_new_tokens (default --max-new-tokens or 32), task (default "niah_single_1";
  the RULER scorer uses string_match_part for tasks starting with "qa", string_match_all else).
  kvcompact's own task files (`kvcompact tasks --family ruler_niah_single_1 ... -o tasks.jsonl`:
  prompt, context, references, family) are read too: question = the prompt after the context up
  to its last "?", answer_prefix = the rest (RULER's answer opening, as kvpress's RULER data
  holds it), answer = references, task = family without "ruler_".
--presses: names of kvpress's PRESS_REGISTRY (evaluation/evaluate_registry.py: snapkv, knorm,
  no_press, ...) plus kvcompact_am (kvcompact.kvpress.AttentionMatchingPress) and
  kvcompact_<method> (kvcompact.kvpress.KvcompactPress(method=<method>)). --ratios: kvpress
  compression ratios (fraction REMOVED); no_press runs once at 0.
--model: a GGUF file (loaded with gguf_file=, float32, tokenizer from the GGUF) or a Hugging
  Face folder / hub-free path.
--scorer: a key of kvpress's SCORER_REGISTRY (default ruler).
--align-keep: kvpress keeps int(T * (1 - cr)) entries; at cr = 0.9 that is 99 of T = 1000
  (1 - 0.9 = 0.0999...98 in floating point) where kvcompact's keep ratio 0.1 keeps
  floor(0.1 * T + 1e-9) = 100. With --align-keep kvpress gets cr - 1e-12, so that both keep the
  same count for every T < 10^6 and ratios with at most 6 decimals; output folders keep the
  name <press>_<cr>.

Missing optional scorer dependencies of kvpress's other benchmarks (jieba, rouge, fuzzywuzzy,
nltk, ...) are stubbed so that evaluate_registry imports; using one of those scorers then raises.
"""
import argparse
import json
import sys
import time
import types
from pathlib import Path


class _Missing:
    def __init__(self, name):
        self._name = name

    def __call__(self, *a, **k):
        return _Missing(self._name)

    def __getattr__(self, a):
        if a.startswith("__"):
            raise AttributeError(a)
        raise RuntimeError(f"{self._name} is not installed (stubbed by bench/peers/kvpress_eval.py)")


class _StubModule(types.ModuleType):
    def __getattr__(self, a):
        if a.startswith("__"):
            raise AttributeError(a)
        return _Missing(self.__name__)


def import_kvpress_evaluation(repo: Path):
    ev = repo / "evaluation"
    if not (ev / "evaluate.py").exists():
        sys.exit(f"--kvpress-repo: {repo} has no evaluation/evaluate.py (a checkout of NVIDIA/kvpress)")
    sys.path.insert(0, str(ev))
    stubbed = []
    for _ in range(40):
        try:
            import evaluate_registry  # noqa: F401

            break
        except ModuleNotFoundError as e:
            if e.name is None or e.name in sys.modules:
                raise
            sys.modules[e.name] = _StubModule(e.name)
            stubbed.append(e.name)
    import evaluate as kv_evaluate

    if not hasattr(kv_evaluate, "EvaluationRunner"):
        sys.exit(f"--kvpress-repo: imported {kv_evaluate.__file__}, which has no EvaluationRunner")
    return kv_evaluate, stubbed


def load_local(path: Path, default_tokens: int, plain: bool = False):
    """The local dataset as kvpress's DataFrame (context, question, answer_prefix, answer, task,
    max_new_tokens). plain: a kvcompact task file's question tail stays whole (no answer_prefix
    split), for --plain-prompt."""
    import pandas as pd

    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
    elif path.suffix == ".csv":
        df = pd.read_csv(path)
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not rows:
            sys.exit(f"--data: {path} holds no rows")
        df = pd.DataFrame(rows)
    if "question" not in df.columns and {"prompt", "context"} <= set(df.columns):
        # kvcompact's task files (`kvcompact tasks --family ruler_...`): prompt = context + question tail.
        bad = [i for i, (p, c) in enumerate(zip(df["prompt"], df["context"])) if not p.startswith(c)]
        if bad:
            sys.exit(f"--data: {path} row {bad[0]}: prompt does not start with context")
        df["question"] = [p[len(c):] for p, c in zip(df["prompt"], df["context"])]
        # RULER's question ends with the answer's opening ("... mentioned in the provided text? The
        # special magic number for X mentioned in the provided text is"): kvpress's RULER data keeps
        # that part as answer_prefix, which its pipeline writes after the chat template's assistant
        # turn; split it off the same way (question up to the last "?").
        if "answer_prefix" not in df.columns and not plain:
            split = [q.rpartition("?") for q in df["question"]]
            df["answer_prefix"] = [tail.strip() if head else "" for head, _, tail in split]
            df["question"] = [head + "?" if head else q for (head, _, _), q in zip(split, df["question"])]
        if "answer" not in df.columns and "answers" not in df.columns:
            df["answer"] = df["references"] if "references" in df.columns else df["reference"].apply(lambda r: [r])
        if "task" not in df.columns and "family" in df.columns:
            df["task"] = df["family"].apply(lambda f: f[len("ruler_"):] if f.startswith("ruler_") else f)
    if "answer" not in df.columns and "answers" in df.columns:
        df = df.rename(columns={"answers": "answer"})
    for col in ("context", "question", "answer"):
        if col not in df.columns:
            sys.exit(f"--data: {path} has no column {col!r} (have {list(df.columns)})")
    df["answer"] = df["answer"].apply(lambda a: [a] if isinstance(a, str) else list(a))
    if "answer_prefix" not in df.columns:
        df["answer_prefix"] = ""
    if "max_new_tokens" not in df.columns:
        df["max_new_tokens"] = default_tokens
    if "task" not in df.columns:
        df["task"] = "niah_single_1"
    df["answer_prefix"] = df["answer_prefix"].fillna("")
    return df


def adds_bos(model: Path, tok) -> bool:
    """Whether the model's own tokenizer settings put BOS first: a GGUF's tokenizer.ggml.add_bos_token
    (what kvcompact and llama.cpp follow; transformers' GGUF conversion turns it on regardless, e.g.
    for SmolLM2, whose file says false), else the Hugging Face tokenizer's add_bos_token."""
    if model.suffix == ".gguf":
        import gguf

        field = gguf.GGUFReader(str(model)).fields.get("tokenizer.ggml.add_bos_token")
        return bool(field.parts[-1][0]) if field is not None else False
    return bool(getattr(tok, "add_bos_token", False))


def make_press(name: str, registry):
    import copy

    if name == "kvcompact_am":
        from kvcompact.kvpress import AttentionMatchingPress

        return AttentionMatchingPress()
    if name.startswith("kvcompact_"):
        from kvcompact.kvpress import KvcompactPress

        return KvcompactPress(method=name[len("kvcompact_"):])
    if name not in registry:
        sys.exit(f"--presses: unknown press {name!r} (kvpress's PRESS_REGISTRY or kvcompact_<method>)")
    return copy.deepcopy(registry[name])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvpress-repo", required=True, type=Path)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--presses", default="no_press,snapkv,kvcompact_am")
    ap.add_argument("--ratios", default="0.5")
    ap.add_argument("--scorer", default="ruler")
    ap.add_argument("--fraction", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--max-context-length", type=int, default=None)
    ap.add_argument("--output-dir", type=Path, default=Path("/tmp/kvpress_eval"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="also print the table as JSON")
    ap.add_argument("--plain-prompt", action="store_true",
                    help="feed the task file's prompt exactly as kvcompact task-eval does (context ids, then the question "
                         "tail verbatim, no chat template; BOS only where the tokenizer adds one), not wrapped in the "
                         "model's chat template as kvpress's pipeline does by default")
    ap.add_argument("--align-keep", action="store_true",
                    help="give kvpress cr - 1e-12 so it keeps kvcompact's floor(r * T) entries")
    args = ap.parse_args()
    if not args.data.exists():
        sys.exit(f"--data: {args.data} does not exist")
    if not args.model.exists():
        sys.exit(f"--model: {args.model} does not exist")
    ratios = [float(r) for r in args.ratios.split(",") if r]
    for r in ratios:
        if not 0.0 <= r < 1.0:
            sys.exit(f"--ratios: {r} is outside [0, 1)")

    import torch

    torch.set_num_threads(args.threads)
    import kvpress  # noqa: F401  (registers the pipeline, patches the attention functions)
    import kvcompact

    kvcompact.set_threads(args.threads)
    import kvcompact.kvpress  # noqa: F401  (wraps the attention functions for beta)

    kv_evaluate, stubbed = import_kvpress_evaluation(args.kvpress_repo)
    if stubbed:
        print(f"# stubbed optional modules of kvpress's other benchmarks: {', '.join(stubbed)}", file=sys.stderr)
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    if args.scorer not in kv_evaluate.SCORER_REGISTRY:
        sys.exit(f"--scorer: {args.scorer!r} is not in kvpress's SCORER_REGISTRY ({sorted(kv_evaluate.SCORER_REGISTRY)})")
    df = load_local(args.data, args.max_new_tokens or 32, args.plain_prompt)
    local_name = f"local:{args.data}"
    kv_evaluate.DATASET_REGISTRY[local_name] = local_name
    kv_evaluate.SCORER_REGISTRY[local_name] = kv_evaluate.SCORER_REGISTRY[args.scorer]

    def load_dataset(name, data_dir=None, split="test"):  # kvpress's evaluate.py calls datasets.load_dataset
        assert name == local_name, name
        return datasets.Dataset.from_pandas(df.copy(), preserve_index=False)

    kv_evaluate.load_dataset = load_dataset

    # ObservedAttentionPress scores on the attention weights, which only eager attention returns
    # (kvpress's evaluate.py loads the model the same way for it).
    eager = any("observed" in p for p in args.presses.split(","))
    akw = dict(attn_implementation="eager") if eager else {}
    if args.model.suffix == ".gguf":
        mkw = dict(gguf_file=args.model.name, dtype=torch.float32, **akw)
        model = AutoModelForCausalLM.from_pretrained(str(args.model.parent), **mkw).eval()
        tok = AutoTokenizer.from_pretrained(str(args.model.parent), gguf_file=args.model.name)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(args.model), dtype=torch.float32, **akw).eval()
        tok = AutoTokenizer.from_pretrained(str(args.model))
    if args.plain_prompt:
        # kvpress's pipeline renders [user: context + separator] with the chat template and splits at
        # the separator; this template renders the content alone (BOS first where the tokenizer adds
        # one), so context and question are tokenized exactly as written (question_suffix "").
        bos = "{{ bos_token }}" if adds_bos(args.model, tok) else ""
        tok.chat_template = bos + "{% for message in messages %}{{ message['content'] }}{% endfor %}"
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tok, device="cpu")

    class LocalRunner(kv_evaluate.EvaluationRunner):
        """kvpress's EvaluationRunner with the already loaded model (a GGUF file needs gguf_file=,
        which its pipeline() call cannot pass); everything else is kvpress's code."""

        def _setup_model_pipeline(self):
            self.pipeline = pipe

    rows = []
    for name in [p for p in args.presses.split(",") if p]:
        for r in ([0.0] if name == "no_press" else ratios):
            press = make_press(name, kv_evaluate.PRESS_REGISTRY)
            reg = f"{name}"
            kv_evaluate.PRESS_REGISTRY[reg] = press
            cfg = kv_evaluate.EvaluationConfig(
                dataset=local_name, model=str(args.model), device="cpu", press_name=reg,
                compression_ratio=r - 1e-12 if args.align_keep and r > 0 else r,
                fraction=args.fraction, max_new_tokens=args.max_new_tokens,
                max_context_length=args.max_context_length, output_dir=str(args.output_dir), log_level="WARNING")
            runner = LocalRunner(cfg)
            out_dir = args.output_dir / f"{name}_{r}"
            out_dir.mkdir(parents=True, exist_ok=True)
            runner._setup_press()
            runner._setup_model_pipeline()
            runner._load_and_prepare_dataset()
            t0 = time.perf_counter()
            runner._run_inference()
            (out_dir / "seconds.json").write_text(json.dumps(
                {"inference_s": time.perf_counter() - t0, "items": len(runner.df)}))  # prefill + press + generation
            runner._save_results(out_dir / "predictions.csv")
            runner._calculate_and_save_metrics(out_dir / "metrics.json")
            metrics = json.loads((out_dir / "metrics.json").read_text())
            for task, m in sorted(metrics.items()):
                rows.append({"press": name, "compression_ratio": r, "task": task, **m,
                             "n": int((runner.df["task"] == task).sum())})
    keys = [k for k in rows[0] if k not in ("press", "compression_ratio", "task", "n")] if rows else []
    print(f"{'press':<22} {'ratio':>6} {'task':<22} {'n':>4} " + " ".join(f"{k:>14}" for k in keys))
    for row in rows:
        print(f"{row['press']:<22} {row['compression_ratio']:>6.2f} {row['task']:<22} {row['n']:>4} "
              + " ".join(f"{row[k]:>14}" for k in keys))
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
