"""The similarity scorer of mask-eval (scripts/similarity_score.py: Cognitive Mirrors' BLEU, ROUGE-1
and embedding cosine) against values worked by hand, its command-line protocol, and mask-eval's
bleu / rouge1 / cosine / cm_accuracy rows against the scorer run here on the answers of the
study's units (stories260K, the scorer that kvcompact embeds)."""
import importlib.util
import json
import math
import subprocess
import sys

import pytest

from conftest import CLI, ROOT, STORIES, require

SPEC = importlib.util.spec_from_file_location("similarity_score", ROOT / "scripts" / "similarity_score.py")
sim = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sim)


def test_bleu_hand_worked():
    assert sim.bleu("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    # clipped n-gram precisions 5/6, 3/5, 2/4, 1/3; equal lengths: no brevity penalty
    assert sim.bleu("the cat sat on the mat", "the cat sat on a mat") == pytest.approx(
        (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25, abs=1e-12)
    # every precision 1; 5 hypothesis tokens, 6 reference tokens: BP = exp(1 - 6/5)
    assert sim.bleu("the cat sat on the", "the cat sat on the mat") == pytest.approx(math.exp(-0.2), abs=1e-12)
    # no smoothing: fewer than 4 tokens have no 4-gram, so BLEU is 0 even for identical strings
    assert sim.bleu("Paris", "Paris") == 0.0
    assert sim.bleu("", "the cat") == 0.0
    # tokenizer 13a splits punctuation off: "mat." == "mat ."
    assert sim.bleu("the cat sat on the mat.", "the cat sat on the mat .") == pytest.approx(1.0)


def test_rouge1_hand_counted():
    # tokens [the, capital, is, paris] vs [paris]: P = 1/4, R = 1, F = 2PR/(P+R) = 0.4
    assert sim.rouge1("The capital is Paris.", "Paris") == pytest.approx(0.4)
    # [a, red, ball] vs [a, blue, ball, x]: overlap 2, P = 2/3, R = 2/4, F = 4/7
    assert sim.rouge1("a red ball", "A blue ball, x") == pytest.approx(4 / 7)
    assert sim.rouge1("no overlap", "something else") == 0.0
    assert sim.rouge1("running", "run") == 0.0  # no stemmer


def test_cosine_of_identical_texts_is_one():
    s = sim.cosine_scores(["The capital of France is Paris.", "Paris", "hello"],
                          ["The capital of France is Paris.", "Paris", "The capital of France is Paris."])
    assert s[0] == pytest.approx(1.0, abs=1e-6)
    assert s[1] == pytest.approx(1.0, abs=1e-6)
    assert -1.0 <= s[2] < 0.9


def test_command_line_protocol_and_errors(tmp):
    doc = {"embedding_model": "", "requests": [
        {"metric": "bleu", "hypotheses": ["a b c d", "x"], "references": ["a b c d", "y"]},
        {"metric": "rouge1", "hypotheses": ["The capital is Paris."], "references": ["Paris"]}]}
    (tmp / "in.json").write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "similarity_score.py"), str(tmp / "in.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    scores = json.loads(r.stdout)["scores"]
    assert scores[0] == pytest.approx([1.0, 0.0]) and scores[1] == pytest.approx([0.4])
    for bad, needle in [({"requests": [{"metric": "meteor", "hypotheses": [], "references": []}]}, "unknown metric"),
                        ({"embedding_model": str(tmp / "none"),
                          "requests": [{"metric": "cosine", "hypotheses": ["a"], "references": ["a"]}]},
                         "no such folder")]:
        (tmp / "bad.json").write_text(json.dumps(bad))
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "similarity_score.py"), str(tmp / "bad.json")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 3
        assert r.stderr.count("\n") == 1 and needle in r.stderr and r.stderr.startswith("similarity scorer: ")


def test_mask_eval_rows_equal_the_scorer_on_the_units(tmp):
    tasks = tmp / "tasks.jsonl"
    items = [
        {"id": "c1", "family": "copy", "answer_type": "text", "max_new_tokens": 8, "reference": "ball and a blue hat.",
         "prompt": "Tom had a red ball and a blue hat. Lily saw a big dog.\nTom had a red"},
        {"id": "c2", "family": "copy", "answer_type": "text", "max_new_tokens": 8,
         "reference": "a little cat named Kitty.",
         "prompt": "Once upon a time there was a little cat named Kitty. The sun was hot.\nOnce upon a time there was"}]
    tasks.write_text("".join(json.dumps(i) + "\n" for i in items))
    scores = tmp / "scores.json"
    r = subprocess.run([CLI, "head-scores", "--model", str(require(STORIES)), "--method", "patching", "--tasks",
                        str(tasks), "-o", str(scores), "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = tmp / "study"
    r = subprocess.run([CLI, "mask-eval", "--model", str(STORIES), "--tasks", str(tasks), "--scores", str(scores),
                        "--k", "2", "--random-seeds", "1", "--ablation", "scale:0.001", "--random-from", "rest",
                        "--metric", "bleu,rouge1,cosine,cm_accuracy", "--out", str(out), "--json", "--threads", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["ablation"] == "scale:0.001" and res["mask_positions"] == "last" and res["random_from"] == "rest"
    units = {c: json.loads((out / "units" / f"mask_eval_{c}.json").read_text())
             for c in ("none", "topk_k2", "randomk_k2_d0")}
    unmasked = units["none"]["result"]["answers"] if "result" in units["none"] else units["none"]["answers"]
    gold = [i["reference"] for i in items]
    for cond, u in units.items():
        answers = u["result"]["answers"] if "result" in u else u["answers"]
        b = [sim.bleu(a, m) for a, m in zip(answers, unmasked)]
        r1 = [sim.rouge1(a, g) for a, g in zip(answers, gold)]
        c = sim.cosine_scores(answers, gold)
        cm = [1.0 if (x > 0.8 or y > 0.6 or z > 0.6) else 0.0 for x, y, z in zip(b, r1, c)]
        kind, k = cond.split("_")[0], (0 if cond == "none" else 2)
        row = {m: next(x["mean"] for x in res["rows"] if x["condition"] == kind and x["k"] == k and x["metric"] == m)
               for m in ("bleu", "rouge1", "cosine", "cm_accuracy")}
        assert row["bleu"] == pytest.approx(sum(b) / 2, abs=1e-9), cond
        assert row["rouge1"] == pytest.approx(sum(r1) / 2, abs=1e-9), cond
        assert row["cosine"] == pytest.approx(sum(c) / 2, abs=1e-5), cond
        assert row["cm_accuracy"] == pytest.approx(sum(cm) / 2), cond
    topk = [h["name"] for h in json.loads(scores.read_text())["heads"][:2]]
    drawn = units["randomk_k2_d0"]["result"]["heads"] if "result" in units["randomk_k2_d0"] else \
        units["randomk_k2_d0"]["heads"]
    assert not set(drawn) & set(topk)  # --random-from rest: drawn outside the top K
