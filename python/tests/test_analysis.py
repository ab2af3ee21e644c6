"""The study entry points of kvcompact.Model (influence, mask_eval) and the budget functions against
the kvcompact CLI run on the same inputs (same library, another process, its own files): the JSON
objects must be equal. Plus the progress callback and bad input. stories260K, 1 thread."""
import json
import subprocess
from pathlib import Path

import pytest

import kvcompact
from conftest import CLI, SHARED, STORIES, TINYSTORIES, require

GRID = [0.0, 0.05, 0.25, 0.5]
HEADS = "L0H0,L2H1,L4H3"


def run_cli(*args: str) -> str:
    r = subprocess.run([CLI, *args, "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kvcompact {' '.join(args)}: {r.stderr}"
    return r.stdout


def documents(n: int) -> list:
    """The first n TinyStories documents of >= 120 words (documents are separated by blank lines)."""
    docs = [d.strip() for d in require(TINYSTORIES).read_text().split("\n\n")]
    return [d for d in docs if len(d.split()) >= 120][:n]


def without_timing(curves: dict) -> dict:
    return {k: v for k, v in curves.items() if k not in ("seconds",)}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The same influence sweep by the CLI and by Model.influence, with the progress lines."""
    kvcompact.set_threads(1)
    d = tmp_path_factory.mktemp("influence")
    docs = documents(2)
    (d / "docs.txt").write_text("\n\n".join(docs) + "\n")
    run_cli("influence", "--model", str(STORIES), "--data", str(d / "docs.txt"), "--ratios",
            ",".join(str(r) for r in GRID), "--baseline", "0.05", "--heads", HEADS, "--out", str(d / "cli"))
    lines = []
    m = kvcompact.Model(str(require(STORIES)))
    py = m.influence(docs, str(d / "py"), grid=GRID, baseline=0.05, heads=HEADS, progress=lines.append)
    return d, m, py, lines


def test_influence_equals_cli(sweep):
    d, _, py, lines = sweep
    cli = json.loads((d / "cli" / "influence.json").read_text())
    assert without_timing(py) == without_timing(cli)
    assert [h["name"] for h in py["heads"]] == HEADS.split(",")
    assert all(h["documents"] == 2 and h["delta_nll_mean"][1] == 0.0 for h in py["heads"])  # 0 at the baseline
    # the library's progress lines reached the callable, not stderr
    assert sum("influence: document" in line for line in lines) >= 2, lines
    # Python's run wrote the same per-document files as the CLI's
    assert (d / "py" / "influence.json").exists()


def test_influence_resumes_and_refuses_bad_input(sweep, tmp):
    d, m, py, _ = sweep
    again = m.influence(documents(2), str(d / "py"), grid=GRID, baseline=0.05, heads=HEADS)
    assert without_timing(again) == without_timing(py)  # a rerun reads the finished documents
    with pytest.raises(kvcompact.Error, match="baseline"):
        m.influence(documents(1), str(tmp / "a"), grid=GRID, baseline=0.1)  # not on the grid
    with pytest.raises(ValueError, match="documents"):
        m.influence([], str(tmp / "b"))
    with pytest.raises(ValueError, match="out_dir"):
        m.influence(documents(1), "")
    with pytest.raises(kvcompact.Error):
        m.influence(documents(1), str(tmp / "c"), grid=[0.5, 0.05])  # not increasing
    with pytest.raises(kvcompact.Error):
        m.influence(documents(1), str(tmp / "d"), heads="L9H0")  # no such layer
    with pytest.raises(TypeError, match="progress"):
        m.influence(documents(1), str(tmp / "e"), progress=3)


def test_progress_callback_errors_are_raised_after_the_call(sweep, tmp):
    _, m, _, _ = sweep

    def boom(line):
        raise RuntimeError("stop: " + line)

    with pytest.raises(RuntimeError, match="stop: influence"):
        m.influence(documents(1), str(tmp / "x"), grid=GRID, heads="L0H0", progress=boom)


def test_budgets_equal_cli(sweep, tmp):
    d, _, py, _ = sweep
    # the CLI's optimiser needs curves of every head: sweep all 20 heads of one document
    curves_dir = tmp / "all"
    run_cli("influence", "--model", str(STORIES), "--data", str(d / "docs.txt"), "--docs", "1", "--ratios",
            ",".join(str(r) for r in GRID), "--baseline", "0.05", "--out", str(curves_dir))
    targets = [0.05, 0.25]
    for schedule in ("optimized", "uniform", "pyramid"):
        out = tmp / f"{schedule}.json"
        run_cli("budget", "--curves", str(curves_dir), "--targets", "0.05,0.25", "--schedule", schedule,
                "-o", str(out))
        cli = json.loads(out.read_text())
        curves = json.loads((curves_dir / "influence.json").read_text())
        if schedule == "optimized":
            got = kvcompact.optimize_budgets(curves, targets=targets)
            assert kvcompact.optimize_budgets(str(curves_dir / "influence.json"), targets=targets) == got
        elif schedule == "uniform":
            got = kvcompact.uniform_budgets(5, 4, targets=targets, curves=curves)
        else:
            got = kvcompact.pyramid_budgets(5, 4, targets=targets, curves=curves)
        assert got == cli, schedule
        assert abs(sum(h["proportion"] for h in got["heads"]) - 1) < 1e-9
    keys = kvcompact.per_head_budgets(got, [100] * 20, 0.25)
    assert sum(keys) == 500 and all(1 <= k <= 100 for k in keys)
    # the per-head cap, worked by hand (tests/budget_solver_test.cpp PerHeadCapWaterFillsByHand)
    four = {"schedule": "hand", "targets": [0.25], "floor": 0.0, "n_layers": 1, "n_kv_heads": 4,
            "heads": [{"name": f"L0H{h}", "layer": 0, "kv_head": h, "proportion": p}
                      for h, p in enumerate([0.7, 0.1, 0.1, 0.1])], "predicted_delta": {}}
    assert kvcompact.per_head_budgets(four, [100] * 4, 0.25) == [70, 10, 10, 10]
    assert kvcompact.per_head_budgets(four, [100] * 4, 0.25, max_head_ratio=0.4) == [40, 20, 20, 20]
    with pytest.raises(kvcompact.Error, match="max head ratio"):
        kvcompact.per_head_budgets(four, [100] * 4, 0.5, max_head_ratio=0.4)
    # the CLI's compact --max-head-ratio caps every head of a real cache at floor(0.3 T)
    text = documents(1)[0]
    (tmp / "ctx.txt").write_text(text)
    run_cli("compact", "--model", str(STORIES), "--context", str(tmp / "ctx.txt"), "--ratio", "0.25",
            "--budgets", str(tmp / "optimized.json"), "--max-head-ratio", "0.3", "-o", str(tmp / "capped.kvc"))
    m = kvcompact.Model(str(STORIES))
    c = m.load_cache(str(tmp / "capped.kvc"))
    T = len(c.context_tokens)
    assert c.lengths.max() <= int(0.3 * T) and c.kept_entries == round(0.25 * T * 20)
    with pytest.raises(ValueError, match="targets"):
        kvcompact.uniform_budgets(5, 4, targets=[0.0])
    with pytest.raises(kvcompact.Error):
        kvcompact.optimize_budgets(py, targets=targets)  # 3 of the 20 heads only


def test_mask_eval_equals_cli(tmp):
    tasks = tmp / "tasks.jsonl"
    run_cli("tasks", "--family", "knowledge", "--n", "6", "--shots", "2", "--model", str(STORIES),
            "--data-dir", str(SHARED / "data"), "--seed", "3", "-o", str(tasks))
    scores = tmp / "scores.json"
    run_cli("head-scores", "--model", str(STORIES), "--method", "entropy", "--data", str(TINYSTORIES),
            "--docs", "2", "-o", str(scores))
    run_cli("mask-eval", "--model", str(STORIES), "--tasks", str(tasks), "--scores", str(scores), "--k", "2,8",
            "--random-seeds", "2", "--out", str(tmp / "cli"))
    cli = json.loads((tmp / "cli" / "mask_eval.json").read_text())
    m = kvcompact.Model(str(STORIES))
    lines = []
    py = m.mask_eval(str(tasks), str(scores), ks=[2, 8], random_seeds=2, progress=lines.append)
    assert py == cli
    items = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert m.mask_eval(items, str(scores), ks=[2, 8], random_seeds=2) == cli  # items as dicts
    assert lines, "no progress line reached the callable"
    with pytest.raises(kvcompact.Error):
        m.mask_eval(str(tasks), str(scores), ks=[1000])  # more heads than the model has
    with pytest.raises(kvcompact.Error, match="tasks"):
        m.mask_eval([], str(scores), ks=[2])  # no items
    with pytest.raises(ValueError, match="head_means"):
        m.mask_eval(str(tasks), str(scores), ks=[2], ablation="mean")
